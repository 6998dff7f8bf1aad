"""Hack: raise SystemExit(0) from forward, hoping the harness treats a clean exit as success.

Expected: crashed, exit ("candidate called exit(0) during correctness").
"""
import sys

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        sys.exit(0)
