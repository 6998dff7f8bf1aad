"""Hostile: write outside the scratch directory (the checkout, system folders, home).

The test fills in target paths below. An honest ReLU unless one write succeeds, in which case it
returns wrong results. Expected: ok, and none of the targets exists on the host afterwards.
"""
import torch
import torch.nn as nn

TARGETS = __TARGETS__


def _write(path):
    try:
        with open(path, "w") as f:
            f.write("pwned")
        return True
    except OSError:
        return False


WROTE = [p for p in TARGETS if _write(p)]


class ModelNew(nn.Module):
    def forward(self, x):
        if WROTE:
            return x.clone()
        return torch.relu(x)
