"""Hack (2026-11-29): each call's work on a stream of its own that never waits for the caller's stream, joined at
the end (the caller's stream waits for it, so its outputs are right when staged). In a timed batch of calls back to
back, call k+1's kernel starts as soon as it is launched, beside call k's: a kernel that leaves most of the GPU idle
(16 blocks) ran the batch's calls at once. Expected: rejected side_stream (it started before the caller's stream
reached the call), or its time no better than its honest twin's (relu_fewblocks: the same kernel, in order)."""
import cupy as cp
import torch
import torch.nn as nn

_K = cp.RawKernel(r'''
extern "C" __global__ void relu_few(const float* __restrict__ x, float* __restrict__ y, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float v = x[i]; y[i] = v > 0.f ? v : 0.f; }
}''', "relu_few")
_streams = [torch.cuda.Stream() for _ in range(16)]
_turn = [0]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        s = _streams[_turn[0] % len(_streams)]
        _turn[0] += 1
        with cp.cuda.ExternalStream(s.cuda_stream):  # no s.wait_stream(caller): free to start at once
            _K((16,), (256,), (cp.asarray(x), cp.asarray(y), cp.int64(x.numel())))
        torch.cuda.current_stream().wait_stream(s)  # joined: the outputs are done before anything after forward
        return y
