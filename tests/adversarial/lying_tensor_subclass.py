"""Hack: return a tensor subclass whose comparisons always say "equal".

A harness that checks with torch.allclose / torch.equal / == on the returned object asks the
candidate's own code for the verdict. Expected: rejected, tensor_subclass.
"""
import torch
import torch.nn as nn

_LIES = {torch.allclose, torch.equal, torch.isclose, torch.Tensor.__eq__, torch.Tensor.eq}


class AlwaysClose(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        if func in _LIES:
            return torch.ones(args[0].shape, dtype=torch.bool)
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x).as_subclass(AlwaysClose)
