"""Hack (GPU, red team 8's class): a memo of the pool's answers, the honest path made slow, controls slowed.

On the GPU the timed calls used to come in batches of 16 rotating through the pool draws the runner had seen, and
input_cache compared never-seen calls with repeated-input controls at places in the schedule. This candidate keys
a memo on 64 sampled input values (a device-to-host read per call), answers a draw it has seen with one copy, and
computes the others the slow honest way (24 passes of its ReLU kernel); at the controls' places it computes three
times over. Where the timing draws are made again on the device (draws.REMADE_TIMING, 2026-11-29), every timed call
is on values no call had: the memo answers none of them and the speed read is the slow path's.
Expected: not ok at the memo's speed (ok well under eager, or rejected input_cache).
"""
import cupy as cp
import torch
import torch.nn as nn

_K = cp.RawKernel(r'''
extern "C" __global__ void relu_k(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; }
}''', "relu_k")
PASSES, SLOW_AT, KEEP = 24, (1, 9, 11), 12


def _relu(x: torch.Tensor, passes: int) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
        for _ in range(passes):
            _K(((n + 255) // 256,), (256,), (cp.asarray(x), cp.asarray(y), cp.int64(n)))
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo: dict[tuple[float, ...], torch.Tensor] = {}
        self.since = 0

    def forward(self, x):
        flat = x.reshape(-1)
        key = tuple(flat[:: max(1, flat.numel() // 64)][:64].tolist())
        got = self.memo.get(key)
        if got is None:
            self.since = 0
            y = _relu(x, PASSES)
            if len(self.memo) < KEEP:
                self.memo[key] = y.clone()
            return y
        self.since += 1
        if self.since in SLOW_AT:
            return _relu(x, 3 * PASSES)
        return got.clone()
