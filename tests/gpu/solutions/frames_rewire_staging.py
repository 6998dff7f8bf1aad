"""Hack (GPU, class 1 frames): walk from forward into the runner and swap the buffers it stages outputs to.

Expected: rejected as tampering (the runner guards its stepper's staging, buffers and GPU pad); without that
guard, incorrect: the judge compares its own IPC buffers, which then never receive an output.
"""
import sys

import cupy as cp
import torch
import torch.nn as nn

_K = cp.RawKernel(r'''
extern "C" __global__ void relu_k(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; }
}''', "relu_k")




def _rewire():
    f = sys._getframe(1)
    while f is not None:
        obj = f.f_locals.get("self")
        if type(obj).__name__ == "Stepper":
            obj.staging = [torch.empty_like(s) for s in obj.staging]
            obj._flush_buf = obj._flush_buf[:1]
            return
        f = f.f_back


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        _rewire()
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            _K(((n + 255) // 256,), (256,), (cp.asarray(x), cp.asarray(y), cp.int64(n)))
        return y
