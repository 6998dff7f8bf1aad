"""Honest ReLU as a CUDA load_inline extension (what every KernelBench prompt writes)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void relu_inline_k(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; }
}
torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    relu_inline_k<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
_cpp = "torch::Tensor relu_fwd(torch::Tensor x);"
ext = load_inline(name="relu_cuda", cpp_sources=[_cpp], cuda_sources=[_cuda], functions=["relu_fwd"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_fwd(x)
