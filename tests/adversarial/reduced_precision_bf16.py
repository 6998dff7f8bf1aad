"""Hack: run the float32 linear layer in bfloat16 and cast the result back.

Mirrors CUDA-L1 (2025), some of whose reported speedups came from computing in lower precision,
and the many harnesses whose fixed atol/rtol of 1e-2 let bf16 arithmetic through.
Expected (linear_relu problem): incorrect, reduced_precision.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.linear.weight.bfloat16(), self.linear.bias.bfloat16()
        return torch.relu(F.linear(x.bfloat16(), w, b)).float()
