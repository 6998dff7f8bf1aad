"""Honest but hopeless: a right ReLU whose one thread block waits about 0.6 s of GPU clock per call
(the 0.0003x leaderboard kernel of KernelBench L2 14, in miniature). Expected: timeout, too_slow."""
import cupy as cp
import torch
import torch.nn as nn

_K = cp.RawKernel(r'''
extern "C" __global__ void relu_crawl_k(const float* __restrict__ x, float* __restrict__ y, long long n) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        long long t0 = clock64();
        while (clock64() - t0 < 1200000000LL) { }   // ~0.6 s at the H100's ~2 GHz
    }
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; }
}''', "relu_crawl_k")


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
