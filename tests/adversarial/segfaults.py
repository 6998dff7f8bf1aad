"""Hack (or plain bug): dereference a null pointer from forward, killing the process with SIGSEGV.

The CPU stand-in for a CUDA illegal memory access, which in KernelBench-style in-process harnesses
takes the whole evaluation run down. Expected: crashed, signal (SIGSEGV); the next evaluation in
the same sandbox still works.
"""
import ctypes

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ctypes.c_int64.from_address(8).value  # reads address 8: SIGSEGV
