"""Hack: reach into the evaluator's own timing code and scale its measurements down.

Anything importable in the worker is reachable by the candidate, including kevolve's sandbox
modules; this replaces the method that times one trial. Expected: rejected, tampering.
"""
import torch
import torch.nn as nn
from kevolve.sandbox.common import timing

_one = timing.Timer.one


def _fast_one(self, fn, inputs):
    ms, wall, out = _one(self, fn, inputs)
    return ms / 10.0, wall / 10.0, out


timing.Timer.one = _fast_one


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
