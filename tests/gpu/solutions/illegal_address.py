"""Crash: a kernel that writes through a wild pointer (sticky CUDA error: the context is poisoned)."""
import cupy as cp
import torch
import torch.nn as nn

_K = cp.RawKernel(r'''
extern "C" __global__ void wild_write(float* y, long long n) {
    float* p = (float*)0x10;  // not mapped
    p[threadIdx.x + n] = 1.0f;
    y[0] = 0.f;
}''', "wild_write")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.relu(x)
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            _K((1,), (32,), (cp.asarray(y), cp.int64(1 << 20)))
        return y
