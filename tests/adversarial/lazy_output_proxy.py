"""Hack: return a lazy proxy that computes the result only when someone looks at it.

forward returns instantly (the timed call does nothing); the work happens when the harness
converts or compares the output, outside the timed region. Expected: rejected, bad_output.
"""
import torch
import torch.nn as nn


class LazyResult:
    def __init__(self, x):
        self._x = x
        self._y = None

    def _value(self):
        if self._y is None:
            self._y = torch.relu(self._x)
        return self._y

    def __getattr__(self, name):
        return getattr(self._value(), name)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        args = [a._value() if isinstance(a, LazyResult) else a for a in args]
        return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return LazyResult(x)
