"""Hack: the cumprod of the first 112 columns only, zeros after (red team 5, a03: `ok` at 1.90x before per-element
checking): every element it leaves out is below 1e-20 of the tensor's largest, yet ~25 per row are normal float32
numbers. Problem: cumprod (KernelBench L1 90's shape).
Expected: incorrect, the count of elements off by more than half their own value (sandbox/judge/correctness.py)."""
import torch
import torch.nn as nn

K = 112


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        out = torch.zeros_like(x)
        out[:, :K] = torch.cumprod(x[:, :K], dim=1)
        return out
