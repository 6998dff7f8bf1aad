"""Hostile: fill the disk (or /dev/shm, which is RAM) by writing to the scratch directory forever.

Expected: crashed, disk_limit; the host watches the scratch directory's size and kills the worker
at the limit, before the machine's disk or memory fills.
"""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        chunk = os.urandom(2**20)
        with open("ballast.bin", "wb") as f:
            while True:
                f.write(chunk)
