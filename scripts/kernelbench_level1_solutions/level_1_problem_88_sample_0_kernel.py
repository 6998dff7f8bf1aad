"""kevolve's solution for KernelBench level 1 problem 88 (MinGPTNewGelu): the tanh GELU as one elementwise kernel.

Written by the project as an honest, simple CUDA kernel (correct first, not tuned) for measuring
evaluation throughput side by side with KernelBench's own harness.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

// GPT's tanh-approximated GELU, one grid-stride loop
__global__ void new_gelu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const float c = 0.7978845608028654f;  // sqrt(2 / pi)
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.f + tanhf(c * (v + 0.044715f * v * v * v)));
    }
}


torch::Tensor new_gelu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const long long n = x.numel();
    const int threads = 256;
    const long long blocks = std::min<long long>((n + threads - 1) / threads, 65535LL * 8);
    new_gelu_kernel<<<(unsigned)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
_CPP = "torch::Tensor new_gelu(torch::Tensor x);"
_ext = load_inline(name="kb_l1_p88", cpp_sources=[_CPP], cuda_sources=[_CUDA], functions=["new_gelu"],
                   extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.new_gelu(x)
