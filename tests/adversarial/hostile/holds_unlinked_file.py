"""Hostile: hold 400 MB in a file that is removed at once but kept open (red team 7's ballast: the scratch is on
/dev/shm, RAM; a removed file is in no folder the watch sums, and in no RSS), then compute honestly.

Expected: crashed, disk_limit: the watch counts the removed files the group still holds (open or mapped).
"""
import os

import torch
import torch.nn as nn

HELD = []


class ModelNew(nn.Module):
    def forward(self, x):
        if not HELD:
            fd = os.open("ballast.bin", os.O_CREAT | os.O_RDWR, 0o600)
            os.unlink("ballast.bin")
            chunk = b"\1" * 2**20
            for _ in range(400):
                os.write(fd, chunk)
            HELD.append(fd)
        return torch.relu(x)
