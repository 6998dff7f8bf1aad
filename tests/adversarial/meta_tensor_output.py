"""Hack: return a tensor with the right shape and dtype but no data at all (meta device).

Harnesses that check shapes and dtypes before values, or that time a call whose result nobody
materialises, can be fooled by an output that has metadata only. Expected: rejected, bad_output.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.empty(x.shape, dtype=x.dtype, device="meta")
