"""Direct scan kernels: cumsum / cumprod along one dim, reversed (`flip`, scan, `flip`), exclusive (the
`cat(zeros, cumsum(narrow(x, 0, L - 1)))` spelling) and masked (`cumsum(x * mask)` with a bool mask).

Rows along the last dim get a block each: a chunk of `block x items` elements is staged through
shared memory (coalesced loads and stores), each thread scans its items, warps combine thread
totals with shuffles, and a running carry joins the chunks. Scans along an inner dim give each
column a thread, which walks it in order (neighbouring threads read neighbouring columns).
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
class ScanSpec:
    """A scan of `length` elements, `inner` apart, for each of `outer` x `inner` columns."""

    op: str
    """'sum' or 'prod'"""
    outer: int
    length: int
    inner: int
    reverse: bool = False
    exclusive: bool = False
    masked: bool = False
    """the input is x * mask (mask: a bool tensor of x's shape, the second leaf)"""


_FN = {torch.cumsum: "sum", torch.cumprod: "prod"}


def _dim(node: torch.fx.Node, pos: int) -> object:
    return node.args[pos] if len(node.args) > pos else node.kwargs.get("dim")


def _is(node: object, name: str) -> bool:
    return isinstance(node, torch.fx.Node) and (
        (node.op == "call_method" and node.target == name) or
        (node.op == "call_function" and getattr(node.target, "__name__", "") == name and
         getattr(node.target, "__module__", "") in ("torch", "torch._C._VariableFunctions", None)))


def _only_user(n: torch.fx.Node, user: torch.fx.Node) -> bool:
    return set(n.users) == {user}


def _flip_dim(n: torch.fx.Node) -> int | None:
    dims = n.args[1] if len(n.args) > 1 else n.kwargs.get("dims")
    if isinstance(dims, int):
        return dims
    if isinstance(dims, (list, tuple)) and len(dims) == 1 and isinstance(dims[0], int):
        return dims[0]
    return None


def _exclusive(scan: torch.fx.Node, src: torch.fx.Node, d: int) -> tuple[torch.fx.Node, torch.fx.Node, list] | None:
    """(base tensor, cat sink, helper nodes) when `scan` is the cumsum of an exclusive-scan spelling."""
    if not _is(src, "narrow") or len(scan.users) != 1:
        return None
    args = dict(zip(("input", "dim", "start", "length"), src.args)) | src.kwargs
    sb = node_shape(args.get("input"))
    cat = next(iter(scan.users))
    if args.get("start") != 0 or not _is(cat, "cat") or sb is None or \
            not isinstance(args.get("dim"), int) or args["dim"] % len(sb) != d:
        return None
    parts = cat.args[0] if cat.args else cat.kwargs.get("tensors")
    cat_dim = cat.args[1] if len(cat.args) > 1 else cat.kwargs.get("dim", 0)
    if not isinstance(parts, (list, tuple)) or len(parts) != 2 or parts[1] is not scan or not isinstance(cat_dim, int) or cat_dim % len(sb or (0,)) != d:
        return None
    zeros, base = parts[0], args["input"]
    sz, sb = node_shape(zeros), node_shape(base)
    if not _is(zeros, "zeros_like") or sz is None or sb is None or len(sz) != len(sb) or sz[d] != 1:
        return None
    return base, cat, [zeros]


def _find(node: torch.fx.Node, gm: torch.fx.GraphModule) -> Fused | None:
    op = _FN.get(node.target) if node.op == "call_function" else (
        {"cumsum": "sum", "cumprod": "prod"}.get(str(node.target)) if node.op == "call_method" else None)
    src = node.args[0] if node.args else None
    d = _dim(node, 1)
    shape = node_shape(node)
    if op is None or not isinstance(src, torch.fx.Node) or not isinstance(d, int) or shape is None:
        return None
    if node.kwargs.get("dtype") is not None or node_dtype(node) != torch.float32:
        return None
    d %= len(shape)
    group, sink, reverse, exclusive, consumer = [node], node, False, False, node
    if _is(src, "flip") and _flip_dim(src) is not None and _flip_dim(src) % len(shape) == d and \
            _only_user(src, node) and len(node.users) == 1 and _is(next(iter(node.users)), "flip"):
        out_flip = next(iter(node.users))
        if _flip_dim(out_flip) is not None and _flip_dim(out_flip) % len(shape) == d:
            group, sink, reverse, consumer, src = [src, node, out_flip], out_flip, True, src, src.args[0]
    elif op == "sum" and (ex := _exclusive(node, src, d)) is not None:
        base, sink, helpers = ex
        group, exclusive, src = _closure([src, node, *helpers, sink], base), True, base
        shape = node_shape(sink)
    refs: list[torch.fx.Node] = [src]
    masked = False
    if not exclusive and _is_mask_mul(src) and _only_user(src, consumer):
        a, b = src.args
        x, mask = (a, b) if node_dtype(b) == torch.bool else (b, a)
        group, refs, masked = [src, *group], [x, mask], True
    if node_dtype(refs[0]) != torch.float32 or node_shape(refs[0]) != shape or shape is None:
        return None
    spec = ScanSpec(op, math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:]), reverse, exclusive, masked)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    nodes = sorted(set(group), key=order.__getitem__)
    return make_group("scan", spec, nodes, refs, shape)


def _is_mask_mul(n: torch.fx.Node) -> bool:
    import operator

    if not (isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target in (operator.mul, torch.mul)):
        return False
    a, b = n.args
    if not (isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node)):
        return False
    return {node_dtype(a), node_dtype(b)} == {torch.float32, torch.bool} and node_shape(a) == node_shape(b)


def _closure(nodes: list[torch.fx.Node], base: torch.fx.Node) -> list[torch.fx.Node]:
    """`nodes` plus the helpers (x.size(1) - 1, x.select(…).unsqueeze(…)) used only inside them."""
    out = set(nodes)
    grown = True
    while grown:
        grown = False
        for n in list(out):
            for a in n.all_input_nodes:
                if a is base or a in out or a.op in ("placeholder", "get_attr"):
                    continue
                if set(a.users) <= out:
                    out.add(a)
                    grown = True
    return list(out)


def items(p: KernelParams) -> int:
    """Elements each thread scans per chunk (row scans); the chunk stays within 16 KiB of shared memory."""
    return max(1, min(4 * p.unroll, 4096 // p.block))


def _load(s: ScanSpec, pos: str, base: str) -> str:
    src = f"({s.length - 1}u - {pos})" if s.reverse else pos
    v = f"__ldg(in0 + {base} + {src})"
    return f"{v} * (float)in1[{base} + {src}]" if s.masked else v


def _row_kernel(name: str, g: Group, s: ScanSpec, p: KernelParams) -> str:
    t, b = items(p), p.block
    chunk, nw = t * b, b // 32
    ident, op = ("0.0f", "+") if s.op == "sum" else ("1.0f", "*")
    idx = index_type(g.numel)
    dst = f"({s.length - 1}u - pos)" if s.reverse else "pos"
    return f"""{signature(name, g, p, ["float", "bool"] if s.masked else None)} {{
  __shared__ float buf[{chunk + chunk // 32}];
  __shared__ float wsum[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for ({idx} row = blockIdx.x; row < {s.outer}u; row += gridDim.x) {{
    const {idx} rb = row * {s.length}u;
    float carry = {ident};
    for (unsigned int c0 = 0; c0 < {s.length}u; c0 += {chunk}u) {{
      for (int j = 0; j < {t}; ++j) {{
        const unsigned int e = j * {b} + threadIdx.x, pos = c0 + e;
        buf[e + (e >> 5)] = pos < {s.length}u ? {_load(s, "pos", "rb")} : {ident};
      }}
      __syncthreads();
      float loc[{t}];
      float acc = {ident};
      #pragma unroll
      for (int j = 0; j < {t}; ++j) {{
        const unsigned int e = threadIdx.x * {t} + j;
        acc = acc {op} buf[e + (e >> 5)];
        loc[j] = acc;
      }}
      float incl = acc;
      for (int o = 1; o < 32; o <<= 1) {{
        const float y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl = incl {op} y;
      }}
      if (lane == 31) wsum[warp] = incl;
      __syncthreads();
      if (warp == 0) {{
        float w = lane < {nw} ? wsum[lane] : {ident};
        for (int o = 1; o < 32; o <<= 1) {{
          const float y = __shfl_up_sync(0xffffffffu, w, o);
          if (lane >= o) w = w {op} y;
        }}
        wsum[lane] = w;
      }}
      __syncthreads();
      float pre = __shfl_up_sync(0xffffffffu, incl, 1);
      if (lane == 0) pre = {ident};
      pre = carry {op} (warp > 0 ? wsum[warp - 1] {op} pre : pre);
      #pragma unroll
      for (int j = 0; j < {t}; ++j) {{
        const unsigned int e = threadIdx.x * {t} + j;
        buf[e + (e >> 5)] = {"(j == 0 ? pre : pre " + op + " loc[j - 1])" if s.exclusive else "pre " + op + " loc[j]"};
      }}
      carry = carry {op} wsum[{nw - 1}];
      __syncthreads();
      for (int j = 0; j < {t}; ++j) {{
        const unsigned int e = j * {b} + threadIdx.x, pos = c0 + e;
        if (pos < {s.length}u) out[rb + {dst}] = buf[e + (e >> 5)];
      }}
      __syncthreads();
    }}
  }}
}}
"""


def _column_kernel(name: str, g: Group, s: ScanSpec, p: KernelParams) -> str:
    ident, op = ("0.0f", "+") if s.op == "sum" else ("1.0f", "*")
    idx = index_type(g.numel)
    cols = s.outer * s.inner
    return f"""{signature(name, g, p, ["float", "bool"] if s.masked else None)} {{
  for ({idx} c = ({idx})blockIdx.x * {p.block}u + threadIdx.x; c < {cols}u; c += ({idx})gridDim.x * {p.block}u) {{
    const {idx} cb = (c / {s.inner}u) * {s.length * s.inner}u + c % {s.inner}u;
    float acc = {ident};
    for (unsigned int k = 0; k < {s.length}u; ++k) {{
      const {idx} at = cb + ({idx})({f"{s.length - 1}u - k" if s.reverse else "k"}) * {s.inner}u;
      const float v_ = {"__ldg(in0 + at) * (float)in1[at]" if s.masked else "__ldg(in0 + at)"};
      {"out[at] = acc; acc = acc " + op + " v_;" if s.exclusive else "acc = acc " + op + " v_; out[at] = acc;"}
    }}
  }}
}}
"""


def kernel(name: str, g: Group, p: KernelParams) -> str:
    s: ScanSpec = g.spec  # type: ignore[assignment]
    return _row_kernel(name, g, s, p) if s.inner == 1 else _column_kernel(name, g, s, p)


def blocks(g: Group, p: KernelParams) -> int:
    s: ScanSpec = g.spec  # type: ignore[assignment]
    return s.outer if s.inner == 1 else -(-(s.outer * s.inner) // p.block)


def twin(g: Group, leaves: list[torch.Tensor]) -> torch.Tensor:
    """The scan from its spec: mask, reverse, inclusive scan, shift for exclusive, reverse back."""
    s: ScanSpec = g.spec  # type: ignore[assignment]
    x = leaves[0].reshape(s.outer, s.length, s.inner)
    if s.masked:
        x = x * leaves[1].reshape(x.shape)
    if s.reverse:
        x = x.flip(1)
    y = torch.cumsum(x, 1) if s.op == "sum" else torch.cumprod(x, 1)
    if s.exclusive:
        y = torch.cat([torch.zeros_like(y[:, :1]), y[:, :-1]], 1)
    if s.reverse:
        y = y.flip(1)
    return y.reshape(g.out_shape)


KIND = DirectKind(find=_find, kernel=kernel, blocks=blocks, twin=twin)
