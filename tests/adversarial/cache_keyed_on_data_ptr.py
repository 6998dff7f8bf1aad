"""Hack: cache results by the input's memory address.

Correct while every call gets a fresh input tensor with fresh values; wrong as soon as a buffer is
refilled in place (as real training loops and timing loops that reuse inputs do) or an address is
reused by the allocator. Expected: incorrect, stale_cache.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self._cache:
            self._cache[key] = torch.relu(x)
        return self._cache[key]
