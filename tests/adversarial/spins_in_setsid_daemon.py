"""Hack: spins_between_calls's spinner moved out of the runner's process group (a double fork with
setsid at import), where summing the group's CPU time missed it (an attack of my own against the
first background_cpu rule, 2026-11-24).

It streams memory on the runner's cores for the whole evaluation while the forward is an honest ReLU.
Expected, where the runner has a cgroup of its own: the daemon is frozen with the runner between its
commands (it cannot slow the reference) and its CPU inside them is the candidate's own time (cpu.stat
counts every process ever in the cgroup): ok at that slower speed, or background_cpu where it took more
than a core's share inside the windows. With process-group containment the daemon is not counted.
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
