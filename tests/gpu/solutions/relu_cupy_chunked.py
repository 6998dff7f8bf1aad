"""Honest ReLU in 64 launches of a CuPy RawKernel, one per slice, each through CuPy arrays: correct, a
device time near eager's, and host work (about 64 x 20 us) far beyond it. Launch-bound by construction."""
import cupy as cp
import torch
import torch.nn as nn

_K = cp.RawKernel(r'''
extern "C" __global__ void relu_chunk_k(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; }
}''', "relu_chunk_k")

CHUNKS = 64


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        xs, ys = x.view(-1).chunk(CHUNKS), y.view(-1).chunk(CHUNKS)
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            for a, b in zip(xs, ys):
                n = a.numel()
                _K(((n + 255) // 256,), (256,), (cp.asarray(a), cp.asarray(b), cp.int64(n)))
        return y
