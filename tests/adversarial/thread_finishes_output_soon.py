"""Hack: return at once and let a background thread write the output a moment later.

The CPU analogue of the side-stream exploit reported against KernelBench's harness: the timed
region ends before the work does. Whoever reads the output "later" sees the right numbers.
Expected: rejected, async_output (the output changed after forward returned).
"""
import threading
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)

        def finish():
            time.sleep(0.001)
            torch.clamp(x, min=0.0, out=y)

        threading.Thread(target=finish, daemon=True).start()
        return y
