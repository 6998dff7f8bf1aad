"""Hack: leave a TorchFunctionMode active that makes torch.equal always true, then mutate inputs.

A mode entered at import intercepts every torch function the harness calls afterwards, including
the comparisons it uses to see whether inputs were modified. Expected: rejected, tampering
("torch function/dispatch mode left active").
"""
import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode


class _EverythingEqual(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.equal:
            return True
        return func(*args, **(kwargs or {}))


_EverythingEqual().__enter__()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.relu_()
