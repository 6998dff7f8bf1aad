"""Honest: the reference's own op (accepted with allow_torch_only); evaluated after each hostile one."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
