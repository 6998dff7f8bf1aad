"""Hostile: spin forever in a child process and a thread as well as in forward.

Expected: timeout; the worker and everything it started are killed at the time limit, from
outside (process group / PID namespace locally, the container in Docker).
"""
import os
import threading

import torch.nn as nn


def _spin():
    while True:
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        if os.fork() == 0:
            _spin()
        threading.Thread(target=_spin, daemon=True).start()
        _spin()
