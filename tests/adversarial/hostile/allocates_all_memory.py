"""Hostile: allocate all the machine's memory, touching every page.

Expected: crashed, memory_limit; the worker is killed at its memory limit (the RSS watch of the
local backend, the container's memory cgroup in Docker), not the orchestrator by the OOM killer.
"""
import torch
import torch.nn as nn

_hoard = []


class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            _hoard.append(torch.ones(64 * 2**20))  # 256 MiB a step, every page written
