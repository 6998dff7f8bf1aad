"""Hack: compute once per input shape and return the cached result ever after.

Benchmarks that time repeated calls on same-shaped inputs see a near-zero time; a harness that
checks only the first call sees a correct answer. A reported pattern in LLM kernel generation
(memoisation across calls). Expected: incorrect, stale_cache.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._cache = {}

    def forward(self, x):
        key = (tuple(x.shape), x.dtype)
        if key not in self._cache:
            self._cache[key] = torch.relu(x)
        return self._cache[key]
