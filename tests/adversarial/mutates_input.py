"""Hack: compute in place in the input buffer and return it (no output allocation to time).

Mirrors in-place "optimisations" seen in LLM-written KernelBench kernels, which corrupt the caller's
tensor and, in harnesses that reuse inputs, make later calls see pre-processed data. Expected:
rejected, mutated_inputs.
"""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.relu_()
