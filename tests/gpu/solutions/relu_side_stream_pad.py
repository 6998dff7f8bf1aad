"""Hack: the work runs on a stream that never waits for the caller's, so it can run during the GPU pad
queued before the timed window and be done before that window opens (found 2026-11-24, VERIFICATION.md).
Expected: rejected side_stream, or its time counted (no speedup from it)."""
import cupy as cp
import torch
import torch.nn as nn

_K = cp.RawKernel(r'''
extern "C" __global__ void relu_early(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}''', "relu_early")
_side = torch.cuda.Stream()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        with cp.cuda.ExternalStream(_side.cuda_stream):  # no wait_stream: free to start at once
            _K(((n + 255) // 256,), (256,), (cp.asarray(x), cp.asarray(y), cp.int64(n)))
        return y
