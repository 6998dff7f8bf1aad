"""Honest twin of relu_unordered_start: the same 16-block grid-stride ReLU (a kernel that leaves most of the GPU
idle), on the caller's stream."""
import cupy as cp
import torch
import torch.nn as nn

_K = cp.RawKernel(r'''
extern "C" __global__ void relu_few(const float* __restrict__ x, float* __restrict__ y, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float v = x[i]; y[i] = v > 0.f ? v : 0.f; }
}''', "relu_few")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            _K((16,), (256,), (cp.asarray(x), cp.asarray(y), cp.int64(x.numel())))
        return y
