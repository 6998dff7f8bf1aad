"""Direct argmax / argmin kernels (int64 outputs) along one dim, or over the whole tensor.

PyTorch's rules: the first index of the extreme value wins, and NaN counts as the extreme (the first
NaN's index). Reductions along the last dim give each output a warp (lanes stride the row, then
combine (value, index) pairs with shuffles); along an inner dim each output gets a thread, and
neighbouring threads read neighbouring columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.fx
from kevolve.kernel_params import KernelParams
from kevolve.offline.kernels_direct.direct import DirectKind, index_type, make_group, signature
from kevolve.offline.graph.ir import Group
from kevolve.offline.graph.partition import Fused
from kevolve.offline.graph.meta import node_dtype, node_shape


@dataclass(frozen=True)
class ArgSpec:
    """arg`op` over `length` elements, `inner` apart, for each of `outer` x `inner` outputs."""

    op: str
    """'max' or 'min'"""
    outer: int
    length: int
    inner: int


def _find(node: torch.fx.Node, gm: torch.fx.GraphModule) -> Fused | None:
    fn = {torch.argmax: "max", torch.argmin: "min"}
    meth = {"argmax": "max", "argmin": "min"}
    op = fn.get(node.target) if node.op == "call_function" else (  # type: ignore[arg-type]
        meth.get(str(node.target)) if node.op == "call_method" else None)
    x = node.args[0] if node.args else node.kwargs.get("input")
    if op is None or not isinstance(x, torch.fx.Node) or node_dtype(x) != torch.float32:
        return None
    d = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    shape, so = node_shape(x), node_shape(node)
    if shape is None or so is None or not (d is None or isinstance(d, int)) or not shape:
        return None
    if d is None:
        spec = ArgSpec(op, 1, math.prod(shape), 1)
    else:
        d %= len(shape)
        spec = ArgSpec(op, math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:]))
    return make_group("argreduce", spec, [node], [x], so, out_dtype="int64")


def _better(op: str) -> str:
    cmp = ">" if op == "max" else "<"
    guard = f"KV_ARG_{op.upper()}_BETTER"
    return f"""#ifndef {guard}
#define {guard}
__device__ __forceinline__ bool kv_arg_{op}_better(float v, long long i, float m, long long j) {{
  if (isnan(v)) return !isnan(m) || i < j;
  if (isnan(m)) return false;
  return v {cmp} m || (v == m && i < j);
}}
#endif
"""


def kernel(name: str, g: Group, p: KernelParams) -> str:
    s: ArgSpec = g.spec  # type: ignore[assignment]
    idx = index_type(s.outer * s.length * s.inner)
    better = f"kv_arg_{s.op}_better"
    unroll = f"#pragma unroll {p.unroll}\n    " if p.unroll > 1 else ""
    if s.inner > 1:
        body = f"""  for ({idx} c = ({idx})blockIdx.x * {p.block}u + threadIdx.x; c < {s.outer * s.inner}u; c += ({idx})gridDim.x * {p.block}u) {{
    const {idx} cb = (c / {s.inner}u) * {s.length * s.inner}u + c % {s.inner}u;
    float m = __ldg(in0 + cb);
    long long j = 0;
    {unroll}for (long long k = 1; k < {s.length}; ++k) {{
      const float v = __ldg(in0 + cb + ({idx})k * {s.inner}u);
      if ({better}(v, k, m, j)) {{ m = v; j = k; }}
    }}
    out[c] = j;
  }}"""
    else:
        wpb = p.block // 32
        body = f"""  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for ({idx} r = ({idx})blockIdx.x * {wpb}u + warp; r < {s.outer}u; r += ({idx})gridDim.x * {wpb}u) {{
    const float* row = in0 + r * {s.length}ull;
    float m = NAN;
    long long j = -1;
    {unroll}for (long long k = lane; k < {s.length}; k += 32) {{
      const float v = __ldg(row + k);
      if (j < 0 || {better}(v, k, m, j)) {{ m = v; j = k; }}
    }}
    for (int o = 16; o > 0; o >>= 1) {{
      const float v = __shfl_xor_sync(0xffffffffu, m, o);
      const long long k = __shfl_xor_sync(0xffffffffu, j, o);
      if (k >= 0 && (j < 0 || {better}(v, k, m, j))) {{ m = v; j = k; }}
    }}
    if (lane == 0) out[r] = j;
  }}"""
    return f"{_better(s.op)}{signature(name, g, p)} {{\n{body}\n}}\n"


def blocks(g: Group, p: KernelParams) -> int:
    s: ArgSpec = g.spec  # type: ignore[assignment]
    if s.inner > 1:
        return -(-(s.outer * s.inner) // p.block)
    return -(-s.outer // (p.block // 32))


def twin(g: Group, leaves: list[torch.Tensor]) -> torch.Tensor:
    s: ArgSpec = g.spec  # type: ignore[assignment]
    x = leaves[0].reshape(s.outer, s.length, s.inner)
    return (torch.argmax(x, 1) if s.op == "max" else torch.argmin(x, 1)).reshape(g.out_shape)


KIND = DirectKind(find=_find, kernel=kernel, blocks=blocks, twin=twin)
