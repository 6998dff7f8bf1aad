"""kevolve's solution for KernelBench level 1 problem 13 (Matmul for symmetric matrices): 32x32 tiled FP32 GEMM.

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

#define TILE 32
// One output element per thread, 32x32 tiles of A and B staged in shared memory. Strides let
// the same kernel read A or B transposed without a copy.
__global__ void gemm_p13_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                       int M, int N, int K, long long sam, long long sak, long long sbk, long long sbn) {
    __shared__ float As[TILE][TILE + 1];
    __shared__ float Bs[TILE][TILE + 1];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < K; t += TILE) {
        const int ka = t + threadIdx.x, kb = t + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[row * sam + ka * sak] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[kb * sbk + col * sbn] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[(long long)row * N + col] = acc;
}


torch::Tensor gemm_p13(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda() && A.scalar_type() == torch::kFloat && B.scalar_type() == torch::kFloat,
                "float32 CUDA tensors expected");
    A = A.contiguous(); B = B.contiguous();
    const int64_t M = A.size(0), K = A.size(1), N = B.size(1);
    const long long sam = K, sak = 1, sbk = N, sbn = 1;
    auto C = torch::empty({M, N}, A.options());
    dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    gemm_p13_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(A.data_ptr<float>(), B.data_ptr<float>(),
        C.data_ptr<float>(), (int)M, (int)N, (int)K, sam, sak, sbk, sbn);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""
_CPP = "torch::Tensor gemm_p13(torch::Tensor A, torch::Tensor B);"
_ext = load_inline(name="kb_l1_p13", cpp_sources=[_CPP], cuda_sources=[_CUDA], functions=["gemm_p13"],
                   extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _ext.gemm_p13(A, B)
