"""Honest exp through a CuPy RawKernel with the fast-math intrinsic (__expf: a few ulps off, flushes below the
smallest normal): every element within the per-element check, the small ones included."""
import cupy as cp
import torch
import torch.nn as nn

_K = cp.RawKernel(r'''
extern "C" __global__ void exp_k(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __expf(x[i]);
}''', "exp_k")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            _K(((n + 255) // 256,), (256,), (cp.asarray(x), cp.asarray(y), cp.int64(n)))
        return y
