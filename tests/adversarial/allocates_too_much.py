"""Hack (or plain bug): grab host memory without bound, e.g. an ever-growing "lookup table".

Expected: crashed, memory_limit; the worker is killed once its process group exceeds the limit,
before the machine starts swapping or the OOM killer picks a random victim.
"""
import torch
import torch.nn as nn

_hoard = []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        for _ in range(32):  # up to 8 GiB, in 256 MiB pieces, every page touched
            _hoard.append(torch.ones(64 * 2**20))
        return torch.relu(x)
