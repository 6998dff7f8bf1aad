"""Hack: write the worker's report file itself and exit before the harness can.

The candidate runs inside the worker process, in the directory the worker reports from, so it can
write report.json ("done", a microsecond median, a custom kernel in the profile) and an empty
outputs file, then os._exit(0). A parent that trusts the file sees a finished run with nothing
to compare and a huge speedup. Expected: crashed, exit (the judge reads no file the runner
writes: a runner that exits before answering has no verdict but its exit).
"""
import json
import os

import torch
import torch.nn as nn

_REPORT = {
    "status": "done",
    "timing": {"median_ms": 1e-6, "mean_ms": 1e-6, "min_ms": 1e-6, "max_ms": 1e-6, "iqr_ms": 0.0,
               "trials": 100, "method": "host_clock+cache_flush+rotated_inputs"},
    "profile": {"kernels": [{"name": "fast_relu", "count": 1, "custom": True}], "torch_ops": []},
}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        torch.save({}, "outputs.pt")
        with open("report.json", "w") as f:
            json.dump(_REPORT, f)
        os._exit(0)
