"""Technique tags come from the kernel's source, comments excluded."""

from __future__ import annotations

from kevolve.archive.techniques import TAGS, techniques

MATMUL = r'''
#define TILE 32
__global__ void mm(const float* __restrict__ A, const float* __restrict__ B, float* C, int N) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    float4 a4 = reinterpret_cast<const float4*>(A)[threadIdx.x];
    #pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
}
'''

REDUCE = r'''
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    return v;
}
__global__ void k(float* out, const float* x) { atomicAdd(out, warp_sum(x[threadIdx.x])); }
'''

WMMA = "using namespace nvcuda;\nwmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;\nwmma::mma_sync(acc, a, b, acc);"


def test_tiled_matmul_gets_shared_memory_tiling_vectorized_unrolling() -> None:
    tags = techniques(MATMUL)
    for t in ("shared_memory", "tiling", "vectorized_loads", "loop_unrolling", "read_only_cache"):
        assert t in tags
    assert "tensor_cores" not in tags and "warp_shuffle" not in tags


def test_warp_reduction_gets_warp_shuffle_and_atomics() -> None:
    assert {"warp_shuffle", "atomics"} <= set(techniques(REDUCE))


def test_wmma_is_tensor_cores() -> None:
    assert "tensor_cores" in techniques(WMMA)


def test_commented_out_code_gives_no_tag() -> None:
    assert techniques("// __shared__ float s[32];\n/* __shfl_down_sync(m, v, 1) */\nint x;") == ()


def test_elementwise_chain_in_one_kernel_counts_as_fusion() -> None:
    src = "__global__ void k(float* y, const float* x) {\n  float v = x[i] * w + b;\n  v = fmaxf(v, 0.f);\n  y[i] = tanhf(expf(v));\n}"
    assert "fusion" in techniques(src)


def test_triton_and_cupy_paths_are_tagged() -> None:
    assert "triton" in techniques("import triton\n@triton.jit\ndef k(x_ptr):\n    acc = tl.dot(a, b)")
    assert "tensor_cores" in techniques("acc += tl.dot(a, b)")
    assert "cupy" in techniques("k = cp.RawKernel(src, 'relu')")


def test_tags_come_in_stable_order() -> None:
    tags = techniques(MATMUL + REDUCE)
    assert list(tags) == [t for t in TAGS if t in tags]


def test_a_cpp_only_load_inline_extension_is_inline_cpp_not_inline_cuda(fixtures) -> None:
    cpp = (fixtures / "solutions" / "relu_cpp.py").read_text()  # the CPU path: cpp_sources only
    assert "inline_cpp" in techniques(cpp) and "inline_cuda" not in techniques(cpp)
    cuda = 'mod = load_inline(name="k", cpp_sources=decl, cuda_sources=src, functions=["f"])'
    assert "inline_cuda" in techniques(cuda) and "inline_cpp" not in techniques(cuda)
    positional = 'src = "__global__ void k(float* x) {}"\nmod = load_inline("k", decl, src)'
    assert "inline_cuda" in techniques(positional)
