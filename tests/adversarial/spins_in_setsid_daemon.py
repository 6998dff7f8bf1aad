"""Hack: spins_between_calls's spinner moved out of the runner's process group (a double fork with
setsid at import), where summing the group's CPU time missed it (an attack of my own against the
first background_cpu rule, 2026-11-24).

It streams memory on the runner's cores for the whole evaluation while the forward is an honest ReLU.
Expected: rejected, background_cpu, where the runner has a cgroup of its own (the cgroup's cpu.stat
counts every process ever in it); with process-group containment the daemon is not counted.
"""
import os
import time

import torch
import torch.nn as nn

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        end = time.time() + 30
        buf = torch.zeros(2 * 2**20)
        while time.time() < end:
            buf.add_(1.0)
        os._exit(0)
    os._exit(0)
os.wait()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
