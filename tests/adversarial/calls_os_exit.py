"""Hack: kill the process with os._exit(0): no exception, no cleanup, a zero exit status.

A harness that runs candidates in-process dies with it; one that reads the exit status sees
success. Expected: crashed, exit (the worker exited without a verdict).
"""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        os._exit(0)
