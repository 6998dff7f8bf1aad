"""CUDA C for one Group under one KernelParams: a pointwise kernel or a multi-pass row kernel.

Shapes are baked in as constants (the problem's shapes are fixed; the forward checks them), so
index arithmetic is division by constants, which the compiler turns into multiplies and shifts.
"""

from __future__ import annotations

import math

from kevolve.kernel_params import KernelParams
from kevolve.offline.graph.ir import (
    Const,
    Expr,
    Group,
    Leaf,
    Op,
    Stat,
    contiguous_strides,
    walk,
)
from kevolve.offline.graph.ops import cuda_call, cuda_float
from kevolve.offline.kernels_cuda.cuda_dtype import STORAGE_PRELUDE, ctype, lanes, narrow, pack, vec_type, widen

PRELUDE = r"""
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
__device__ __forceinline__ float kv_sum(float a, float b) { return a + b; }
__device__ __forceinline__ float kv_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ float kv_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ float kv_prod(float a, float b) { return a * b; }
#define KV_WARP_REDUCE(F, v) \
  for (int o_ = 16; o_ > 0; o_ >>= 1) v = F(v, __shfl_xor_sync(0xffffffffu, v, o_));
// one-pass pairs (cuda_pair.py): Chan's merge of (count, mean, M2); online softmax's merge of (max, sum)
__device__ __forceinline__ void kv_welford_merge(float& n, float& mean, float& m2, float nb, float meanb, float m2b) {
  float nn = n + nb, d = meanb - mean, w = nb / fmaxf(nn, 1.0f);
  mean += d * w; m2 += m2b + d * d * n * w; n = nn;
}
// A thread's own walk: the same merge with mean and M2 Kahan-compensated (mean - cm, m2 - cq are the values).
// Uncompensated, a long walk stalls: once d * nb / n falls below half an ulp of the mean the updates round away.
__device__ __forceinline__ void kv_welford_add(float& n, float& mean, float& cm, float& m2, float& cq,
                                               float nb, float meanb, float m2b) {
  float nn = n + nb, d = (meanb - mean) + cm, w = nb / nn;
  float y = d * w - cm, t = mean + y; cm = (t - mean) - y; mean = t;
  y = (m2b + d * d * n * w) - cq; t = m2 + y; cq = (t - m2) - y; m2 = t; n = nn;
}
__device__ __forceinline__ void kv_softmax_merge(float& m, float& s, float mb, float sb) {
  float mm = fmaxf(m, mb);
  s = (m == mm ? s : s * expf(m - mm)) + (mb == mm ? sb : sb * expf(mb - mm)); m = mm;
}
""" + STORAGE_PRELUDE


def _runs(shape: tuple[int, ...], strides: tuple[int, ...], dims: tuple[int, ...]) -> list[tuple[int, int]]:
    """(size, stride) runs over `dims` (outer to inner), adjacent dims merged where the layout allows."""
    runs: list[tuple[int, int]] = []
    for d in dims:
        sz, st = shape[d], strides[d]
        if sz == 1:
            continue
        if runs and runs[-1][1] == st * sz:
            runs[-1] = (runs[-1][0] * sz, st)
        else:
            runs.append((sz, st))
    return runs


def offset(shape: tuple[int, ...], strides: tuple[int, ...], dims: tuple[int, ...], var: str, idx: str) -> str:
    """C expression: the element offset of enumeration index `var` over `dims` for these strides."""
    runs = _runs(shape, strides, dims)
    terms = []
    for i, (sz, st) in enumerate(runs):
        if st == 0:
            continue
        inner = math.prod(s for s, _ in runs[i + 1:])
        t = var if inner == 1 else f"({var} / ({idx}){inner}u)"
        if i > 0:
            t = f"({t} % ({idx}){sz}u)"
        terms.append(t if st == 1 else f"{t} * ({idx}){st}u")
    return " + ".join(terms) or f"({idx})0"


class _Emitter:
    """SSA lines for expressions; leaves and stats are resolved by the caller's maps."""

    def __init__(self, leaf: dict[int, str], stat: dict[int, str], tag: str) -> None:
        self.leaf, self.stat, self.tag, self.lines, self.names = leaf, stat, tag, [], {}

    def __call__(self, e: Expr) -> str:
        for sub in walk(e):
            if sub in self.names:
                continue
            if isinstance(sub, Leaf):
                self.names[sub] = self.leaf[sub.index]
            elif isinstance(sub, Stat):
                self.names[sub] = self.stat[sub.index]
            elif isinstance(sub, Const):
                self.names[sub] = cuda_float(sub.value)
            else:
                assert isinstance(sub, Op)
                name = f"{self.tag}{len(self.lines)}"
                self.lines.append(f"float {name} = {cuda_call(sub.name, [self.names[a] for a in sub.args], sub.params)};")
                self.names[sub] = name
        return self.names[e]


def _leaves_in(e: Expr) -> list[int]:
    return sorted({x.index for x in walk(e) if isinstance(x, Leaf)})


def _signature(name: str, group: Group, p: KernelParams, extra: str = "") -> str:
    """The kernel's header: one const pointer per leaf, then the output, each of its storage type (`extra`:
    more parameters after them)."""
    args = ", ".join(f"const {ctype(leaf.dtype)}* __restrict__ in{i}" for i, leaf in enumerate(group.leaves))
    return (f'extern "C" __global__ void __launch_bounds__({p.block}) {name}({args}, '
            f"{ctype(group.out_dtype)}* __restrict__ out{extra})")


def _idx_type(group: Group) -> str:
    return "unsigned int" if group.numel < 2**31 else "unsigned long long"


def pointwise_kernel(name: str, group: Group, p: KernelParams) -> str:
    """Grid-stride over vector slots; contiguous leaves load as float2/float4."""
    idx, vec, n = _idx_type(group), p.vec, group.numel
    full = contiguous_strides(group.shape)
    dims = tuple(range(len(group.shape)))
    body: list[str] = [f"{idx} i0 = s * {vec}u;"]
    lane_leaf: list[dict[int, str]] = [{} for _ in range(vec)]
    for li, spec in enumerate(group.leaves):
        dt = spec.dtype
        if all(st == 0 for st in spec.strides):
            body.append(f"float l{li} = {widen(dt, f'__ldg(in{li})')};")
            for lane in range(vec):
                lane_leaf[lane][li] = f"l{li}"
        elif spec.strides == full and vec > 1:
            vt = vec_type(dt, vec)
            body.append(f"{vt} l{li} = __ldg(reinterpret_cast<const {vt}*>(in{li}) + s);")
            for lane, x in enumerate(lanes(dt, vec, f"l{li}")):
                lane_leaf[lane][li] = x
        else:
            for lane in range(vec):
                var = "i0" if lane == 0 else f"(i0 + {lane}u)"
                ld = f"__ldg(in{li} + {offset(group.shape, spec.strides, dims, var, idx)})"
                body.append(f"float l{li}_{lane} = {widen(dt, ld)};")
                lane_leaf[lane][li] = f"l{li}_{lane}"
    results = []
    for lane in range(vec):
        em = _Emitter(lane_leaf[lane], {}, f"t{lane}_")
        r = em(group.out)
        body += em.lines
        results.append(r)
    od = group.out_dtype
    if vec == 1:
        body.append(f"out[s] = {narrow(od, results[0])};")
    else:
        body.append(f"reinterpret_cast<{vec_type(od, vec)}*>(out)[s] = {pack(od, vec, results)};")
    inner = "\n        ".join(body)
    return f"""{_signature(name, group, p)} {{
  const {idx} nv = {n // vec}u;
  const {idx} step = ({idx})gridDim.x * {p.block * p.ilp}u;
  for ({idx} s0 = ({idx})blockIdx.x * {p.block * p.ilp}u + threadIdx.x; s0 < nv; s0 += step) {{
    #pragma unroll
    for (int j = 0; j < {p.ilp}; ++j) {{
      {idx} s = s0 + ({idx})j * {p.block}u;
      if (s < nv) {{
        {inner}
      }}
    }}
  }}
}}
"""
