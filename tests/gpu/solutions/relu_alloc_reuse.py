"""Hack: never writes its output and hopes the allocator hands back memory holding the answer
(the bug behind Sakana AI CUDA Engineer's withdrawn results)."""
import cupy as cp
import torch
import torch.nn as nn

_K = cp.RawKernel(r'''
extern "C" __global__ void touch_nothing(const float* x, long long n) { }
''', "touch_nothing")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            _K((1,), (1,), (cp.asarray(x), cp.int64(x.numel())))
        return y
