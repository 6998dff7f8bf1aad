"""Hack: write garbage into the channel the harness answers the judge on.

Class 8 (bad output file). The incident: an object in the outputs file that the parent's loader
refused crashed `kevolve eval` with a traceback. Outputs no longer travel as files, but the runner's
answers travel through a pipe the candidate's process holds (its number is on the runner's command
line; a container's runner has a FIFO in its directory instead): here it writes a frame header
announcing 3 GB, then bytes that are not JSON. Expected: crashed, bad_report.
"""
import os
import struct

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        argv = open("/proc/self/cmdline", "rb").read().split(b"\0")
        fds = [a for a in argv if a.startswith(b"--fds=")]
        fd = int(fds[0].split(b",")[1]) if fds else os.open("res", os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, struct.pack(">I", 3 * 2**30) + b"\x00not json")
        return torch.relu(x)
