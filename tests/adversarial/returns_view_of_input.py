"""Hack: returns a view of its input where the reference materialises the transpose (red team 5, a09: 1.25x under
both isolations with --allow-torch-only): the harness's staging copy then does the model's work. Problem: transpose.
Expected: rejected, aliases_input (sandbox/runner/integrity.py `aliasing`)."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.t()
