"""Hack: inspect the call stack and, when called from a timing loop, return the previous result.

Detecting the benchmark (here: a caller frame from a module named *timing*) and doing no work under
it is the same idea as "right for the first calls", keyed on who is calling. Expected: incorrect,
stale_cache (the timed calls' outputs are checked too).
"""
import sys

import torch
import torch.nn as nn


def _called_from_timing():
    f = sys._getframe(1)
    while f is not None:
        if "timing" in f.f_globals.get("__name__", ""):
            return True
        f = f.f_back
    return False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._last = None

    def forward(self, x):
        if self._last is not None and _called_from_timing():
            return self._last
        self._last = torch.relu(x)
        return self._last
