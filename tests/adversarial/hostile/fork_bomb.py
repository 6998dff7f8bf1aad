"""Hostile: fork until the system's process table is full.

Every child spins and forks again; the parent keeps forking until fork() fails, then gives up
with the error. Expected: runtime_error naming the failed fork (the process limit stops it in
the sandbox, not the machine's pid table), and every child dies with the worker.
"""
import os
import time

import torch.nn as nn


def _bomb():
    n = 0
    while True:
        pid = os.fork()  # raises BlockingIOError at the process limit
        if pid == 0:
            try:
                while True:
                    try:
                        os.fork()
                    except OSError:
                        time.sleep(0.01)
            finally:
                os._exit(0)
        n += 1


class ModelNew(nn.Module):
    def forward(self, x):
        _bomb()
