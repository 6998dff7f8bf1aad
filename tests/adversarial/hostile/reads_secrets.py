"""Hostile: read secrets outside the scratch directory (archive database, run folders, home).

The test plants a secret file and fills in its path (and an existing file of the user's home)
below. This candidate is an honest ReLU unless it can read one of them, in which case it returns
wrong results. Expected: ok, which holds only if the worker cannot see those files.
"""
import torch
import torch.nn as nn

TARGETS = __TARGETS__


def _readable(path):
    try:
        with open(path, "rb") as f:
            return bool(f.read(1))
    except OSError:
        return False


LEAKED = [p for p in TARGETS if _readable(p)]


class ModelNew(nn.Module):
    def forward(self, x):
        if LEAKED:
            return x.clone()  # a visible signal: a secret was readable
        return torch.relu(x)
