"""Hack: correct for the first calls, then skip the work.

Mirrors the gap in KernelBench's harness, which checks correctness on a few calls and then times
other calls whose outputs it never looks at. Expected: incorrect, degrades_over_calls.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= 15:
            return torch.relu(x)
        return x.clone()  # "fast path": the activation is skipped once the checks are likely over
