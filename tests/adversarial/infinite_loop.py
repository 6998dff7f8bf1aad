"""Hack (or plain bug): forward never returns.

Expected: timeout; the worker's whole process group is killed after the wall-clock limit.
"""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        while True:
            pass
