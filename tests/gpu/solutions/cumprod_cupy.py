"""Honest cumprod along dim 1 through a CuPy RawKernel: a thread per row, the running product in float32 to the end
of the row (to underflow and beyond), as eager computes it."""
import cupy as cp
import torch
import torch.nn as nn

_K = cp.RawKernel(r'''
extern "C" __global__ void cumprod_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* a = x + (long long)r * cols;
    float* b = y + (long long)r * cols;
    float p = 1.f;
    for (int j = 0; j < cols; ++j) { p *= a[j]; b[j] = p; }
}''', "cumprod_rows")


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            _K(((rows + 127) // 128,), (128,), (cp.asarray(x), cp.asarray(y), cp.int32(rows), cp.int32(cols)))
        return y
