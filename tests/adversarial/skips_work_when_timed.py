"""Hack: inspect the call stack and, when called from the evaluator's harness, return the previous result.

Detecting the benchmark (here: a caller frame from one of kevolve's sandbox modules) and doing no
work under it is the same idea as "right for the first calls", keyed on who is calling. Expected:
incorrect, stale_cache (every call is checked, timed or not: there is no unchecked caller to find).
"""
import sys

import torch
import torch.nn as nn


def _called_from_timing():
    f = sys._getframe(1)
    while f is not None:
        if f.f_globals.get("__name__", "").startswith("kevolve.sandbox"):
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
