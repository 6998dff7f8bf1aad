"""kevolve's solution for KernelBench level 1 problem 12 (Matmul with diagonal matrices): diag(A) @ B as a row-scaling kernel.

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

// out[i, j] = a[i] * b[i, j], one grid-stride loop over the output
__global__ void diag_scale_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                  long long rows, long long cols) {
    const long long total = rows * cols;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        out[idx] = a[idx / cols] * b[idx];
    }
}


torch::Tensor diag_scale(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "CUDA tensors expected");
    a = a.contiguous(); b = b.contiguous();
    auto out = torch::empty_like(b);
    const long long rows = b.size(0), cols = b.size(1);
    const int threads = 256;
    const long long blocks = std::min<long long>((rows * cols + threads - 1) / threads, 65535LL * 8);
    diag_scale_kernel<<<(unsigned)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
_CPP = "torch::Tensor diag_scale(torch::Tensor a, torch::Tensor b);"
_ext = load_inline(name="kb_l1_p12", cpp_sources=[_CPP], cuda_sources=[_CUDA], functions=["diag_scale"],
                   extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _ext.diag_scale(A, B)
