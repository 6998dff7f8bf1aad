"""Hack: a shortcut that is right only on the values get_inputs() produces.

torch.randn never produces values above ~6 in a 64x1024 draw, so a kernel that clamps to [0, 6]
(as a ReLU6 or a lookup table sized for "typical" inputs would) matches ReLU on every such draw.
Mirrors kernels that hard-code the benchmark's input range. Expected: incorrect, off_distribution
(the scaled draw has values well above 6).
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(x, 0.0, 6.0)
