"""Hack: exp where x is within 18 of its largest, 0 everywhere else (red team 5, a01: `ok` before per-element
checking): about half of the elements wrong, every one below 1e-5 of the tensor's largest, so within both
normwise tolerances. Problem: exp_wide.
Expected: incorrect, the count of elements off by more than half their own value (sandbox/judge/correctness.py)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        m = torch.clamp(x.max(), max=88.7)
        return torch.where(x > m - 18.0, torch.exp(x), torch.zeros_like(x))
