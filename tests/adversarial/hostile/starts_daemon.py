"""Hostile: leave a daemon behind that outlives the evaluation and spins, slowing the next one.

It double-forks a `setsid` grandchild (a session and process group of its own, re-parented away
from the worker, so a process-group kill cannot see it) that execs a Python spinning forever,
with a marker the test fills in in its argv. The candidate itself is an honest ReLU. The incident:
without bubblewrap such a daemon kept running and an unrelated honest kernel measured 0.50x
instead of 1.76x. Expected: ok (see the end), and the daemon dies with its worker (the worker's cgroup, the
subreaper's sweep, bubblewrap's PID namespace, or the container): nothing carrying the marker
runs once the evaluation has returned, and the next evaluation is unaffected; on the CPU with a
cgroup per runner the judge counts the daemon's CPU time beside the calls: rejected, background_cpu.
"""
import os
import sys

import torch
import torch.nn as nn

MARK = __MARK__
_started = []


def _daemon():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "while True: pass", MARK])
        os._exit(0)
    os.waitpid(pid, 0)


class ModelNew(nn.Module):
    def forward(self, x):
        if not _started:
            _started.append(True)
            _daemon()
        return torch.relu(x)
