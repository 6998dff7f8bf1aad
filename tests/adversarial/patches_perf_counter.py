"""Hack: replace time.perf_counter so that timed calls look ten times faster.

Mirrors harness-clock tampering reported against LLM kernel benchmarks: a candidate runs in the
benchmark's own interpreter and can rebind the clock the harness reads. Expected: rejected,
tampering (kevolve's timer keeps its own reference, and the replacement is detected).
"""
import time

import torch
import torch.nn as nn

_real = time.perf_counter
_t0 = _real()


def _slow_clock():
    return _t0 + (_real() - _t0) / 10.0


time.perf_counter = _slow_clock


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
