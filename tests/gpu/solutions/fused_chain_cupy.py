"""Honest: the five elementwise ops fused into one CuPy kernel with float4 loads (one pass over memory)."""
import cupy as cp
import torch
import torch.nn as nn

_SRC = r'''
__device__ __forceinline__ float f(float v, float s, float b) {
    v = v * s + b;
    v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    v = fminf(fmaxf(v, -1.f), 2.f);
    return v * 0.5f;
}
extern "C" __global__ void fused_chain(const float4* __restrict__ x, float4* __restrict__ y,
                                       long long n4, float s, float b) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) {
        float4 v = x[i];
        v.x = f(v.x, s, b); v.y = f(v.y, s, b); v.z = f(v.z, s, b); v.w = f(v.w, s, b);
        y[i] = v;
    }
}
extern "C" __global__ void fused_chain_tail(const float* __restrict__ x, float* __restrict__ y,
                                            long long start, long long n, float s, float b) {
    long long i = start + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = f(x[i], s, b);
}
'''
_MOD = cp.RawModule(code=_SRC)
_MAIN, _TAIL = _MOD.get_function("fused_chain"), _MOD.get_function("fused_chain_tail")


class ModelNew(nn.Module):
    def __init__(self, scale: float = 1.7, shift: float = 0.3):
        super().__init__()
        self.scale, self.shift = scale, shift

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        n4 = n // 4 if x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0 else 0
        s, b = cp.float32(self.scale), cp.float32(self.shift)
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            if n4:
                blocks = min((n4 + 255) // 256, 132 * 16)
                _MAIN((blocks,), (256,), (cp.asarray(x), cp.asarray(y), cp.int64(n4), s, b))
            rest = n - 4 * n4
            if rest:
                _TAIL(((rest + 255) // 256,), (256,), (cp.asarray(x), cp.asarray(y), cp.int64(4 * n4),
                                                       cp.int64(n), s, b))
        return y
