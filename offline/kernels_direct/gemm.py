"""A generated fp32 GEMM for modules that are nothing but a matrix product (KernelBench level 1).

With an op to fuse, products stay cuBLAS calls and the chain after them becomes an epilogue kernel;
a module that is only `torch.matmul` / `torch.bmm` / `@` has nothing to fuse, so the offline proposer
writes the product itself: shared-memory tiles, a register micro-tile per thread, fp32 accumulation
(no TF32: results must match eager's fp32 accuracy). Slower than cuBLAS, but a verified candidate.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.fx
from kevolve.kernel_params import KernelParams
from kevolve.offline.graph.ir import Group, Leaf, LeafSpec
from kevolve.offline.graph.partition import Fused
from kevolve.offline.graph.meta import node_dtype, node_shape

_MATMUL = {torch.matmul, torch.mm, torch.bmm, operator.matmul}


@dataclass(frozen=True)
class GemmShape:
    """C[b] (M x N) = A[b] (M x K) @ B[b] (K x N); a_batched / b_batched: the operand has a batch dim."""

    batch: int
    m: int
    n: int
    k: int
    a_batched: bool
    b_batched: bool


def _gemm_shape(a: tuple[int, ...], b: tuple[int, ...]) -> GemmShape | None:
    if len(b) == 2 and len(a) >= 2 and a[-1] == b[0]:
        m = 1
        for s in a[:-1]:
            m *= s
        return GemmShape(1, m, b[1], b[0], False, False)
    if len(a) == 3 and len(b) == 3 and a[0] == b[0] and a[2] == b[1]:
        return GemmShape(a[0], a[1], b[2], a[2], True, True)
    return None


def find_gemm(gm: torch.fx.GraphModule) -> Fused | None:
    """The graph's single fp32 matrix product, as a one-node group, if that is all the graph computes."""
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    mms = [n for n in calls if (n.op == "call_function" and n.target in _MATMUL) or
           (n.op == "call_method" and n.target in ("matmul", "mm", "bmm"))]
    if len(mms) != 1 or len(mms[0].args) != 2 or not all(isinstance(x, torch.fx.Node) for x in mms[0].args):
        return None
    node = mms[0]
    a, b = node.args
    sa, sb, so = node_shape(a), node_shape(b), node_shape(node)
    if sa is None or sb is None or so is None or {node_dtype(a), node_dtype(b)} != {torch.float32}:
        return None
    shape = _gemm_shape(sa, sb)
    if shape is None:
        return None
    g = Group(shape=(shape.batch, shape.m, shape.n), reduce_dims=(), leaves=[LeafSpec(a.name, ()), LeafSpec(b.name, ())],
              reductions=[], out=Leaf(0), out_scope="elem", out_shape=so, nodes=[node.name], kind="gemm",
              gemm=shape)
    return Fused(group=g, nodes=[node], extra=[], leaf_refs=[a, b])


def tile(p: KernelParams) -> tuple[int, int]:
    """(block tile edge, k-step) for these parameters: 256 threads with 4x4 outputs each = 64x64."""
    return 64, 16 if p.unroll >= 2 else 8


def gemm_kernel(name: str, s: GemmShape, p: KernelParams) -> str:
    """CUDA source of the product for these shapes."""
    bm, bk = tile(p)
    return f"""extern "C" __global__ void __launch_bounds__(256) {name}(const float* __restrict__ A,
    const float* __restrict__ B, float* __restrict__ C) {{
  const int M = {s.m}, N = {s.n}, K = {s.k};
  __shared__ float As[{bk}][{bm} + 4];
  __shared__ float Bs[{bk}][{bm} + 4];
  const float* Ab = A + (size_t)blockIdx.z * {s.m * s.k if s.a_batched else 0}ull;
  const float* Bb = B + (size_t)blockIdx.z * {s.k * s.n if s.b_batched else 0}ull;
  float* Cb = C + (size_t)blockIdx.z * {s.m * s.n}ull;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int row0 = blockIdx.y * {bm}, col0 = blockIdx.x * {bm};
  float acc[4][4];
  #pragma unroll
  for (int i = 0; i < 4; ++i)
    #pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += {bk}) {{
    for (int i = threadIdx.x; i < {bm * bk}; i += 256) {{
      int r = i / {bk}, c = i % {bk}, gr = row0 + r, gc = k0 + c;
      As[c][r] = (gr < M && gc < K) ? Ab[(size_t)gr * K + gc] : 0.0f;
    }}
    for (int i = threadIdx.x; i < {bm * bk}; i += 256) {{
      int r = i / {bm}, c = i % {bm}, gr = k0 + r, gc = col0 + c;
      Bs[r][c] = (gr < K && gc < N) ? Bb[(size_t)gr * N + gc] : 0.0f;
    }}
    __syncthreads();
    #pragma unroll
    for (int kk = 0; kk < {bk}; ++kk) {{
      float a[4], b[4];
      #pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
      #pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }}
    __syncthreads();
  }}
  #pragma unroll
  for (int i = 0; i < 4; ++i) {{
    int r = row0 + ty + 16 * i;
    #pragma unroll
    for (int j = 0; j < 4; ++j) {{
      int c = col0 + tx + 16 * j;
      if (r < M && c < N) Cb[(size_t)r * N + c] = acc[i][j];
    }}
  }}
}}
"""


def gemm_launcher(fz: Fused, k: int, name: str, p: KernelParams) -> str:
    """Python launcher: contiguous operands, output, a (N tiles, M tiles, batch) grid."""
    s = fz.group.gemm
    assert s is not None
    bm, _ = tile(p)
    grid = f"({-(-s.n // bm)}, {-(-s.m // bm)}, {s.batch})"
    return (f"def _kv_launch_{k}(a0, a1):\n    \"\"\"{fz.group.describe()}\"\"\"\n"
            f"    a0, a1 = a0.contiguous(), a1.contiguous()\n"
            f"    out = torch.empty({tuple(fz.group.out_shape)!r}, device=a0.device, dtype=torch.float32)\n"
            f"    with _kv_stream():\n"
            f"        _kv_fn({name!r})({grid}, (256,), _kv_args((a0, a1, out)))\n"
            f"    return out\n")
