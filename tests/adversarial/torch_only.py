"""Hack: no custom kernel at all; forward calls the same PyTorch op as the reference.

Mirrors CUDA-L1 (2025), most of whose published H100 "kernels" turned out to be plain PyTorch
calls. Expected: rejected, no_custom_kernel; accepted when the user passes --allow-torch-only.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
