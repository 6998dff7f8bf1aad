"""Direct pooling kernels: max and average pooling over 1, 2 or 3 spatial dims.

One thread per output element walks its window (strided, padded, dilated for max pooling) with
PyTorch's rules: max pooling propagates NaN and skips padding; average pooling divides by the window
clipped to the padded input (`count_include_pad`), by the valid elements only, or by
`divisor_override`. Output sizes (ceil_mode included) come from the traced shapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.fx
from kevolve.kernel_params import KernelParams
from kevolve.offline.kernels_direct.direct import (
    DirectKind,
    grid_stride,
    index_type,
    make_group,
    signature,
    unravel,
    window_patches,
)
from kevolve.offline.graph.ir import Group
from kevolve.offline.graph.partition import Fused
from kevolve.offline.graph.meta import node_dtype, node_shape
from torch import nn

_MAX = {nn.MaxPool1d: 1, nn.MaxPool2d: 2, nn.MaxPool3d: 3}
_AVG = {nn.AvgPool1d: 1, nn.AvgPool2d: 2, nn.AvgPool3d: 3}


@dataclass(frozen=True)
class PoolSpec:
    """Sizes and settings of one pooling; tuples have one entry per spatial dim."""

    op: str
    """'max' or 'avg'"""
    planes: int
    """batch x channels (each pooled independently)"""
    in_size: tuple[int, ...]
    out_size: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    count_include_pad: bool = True
    divisor: int | None = None
    """avg: divisor_override"""


def _tuple(v: object, nd: int) -> tuple[int, ...]:
    return tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v),) * nd  # type: ignore[arg-type]


def _find(node: torch.fx.Node, gm: torch.fx.GraphModule) -> Fused | None:
    if node.op != "call_module" or len(node.args) != 1 or node.kwargs:
        return None
    mod = gm.get_submodule(str(node.target))
    nd = _MAX.get(type(mod)) or _AVG.get(type(mod))
    x = node.args[0]
    if nd is None or not isinstance(x, torch.fx.Node) or getattr(mod, "return_indices", False):
        return None
    sx, so = node_shape(x), node_shape(node)
    if sx is None or so is None or len(sx) != 2 + nd or node_dtype(x) != torch.float32:
        return None
    is_max = type(mod) in _MAX
    stride = mod.stride if mod.stride is not None else mod.kernel_size
    spec = PoolSpec("max" if is_max else "avg", sx[0] * sx[1], tuple(sx[2:]), tuple(so[2:]), _tuple(mod.kernel_size, nd),
                    _tuple(stride, nd), _tuple(mod.padding, nd), _tuple(mod.dilation, nd) if is_max else (1,) * nd,
                    bool(getattr(mod, "count_include_pad", True)), getattr(mod, "divisor_override", None))
    return make_group("pool", spec, [node], [x], so)


def tile(g: Group, p: KernelParams) -> int:
    """Outputs per thread along the last spatial dim (`ilp`: 1, 2, 4 or 8): their windows' overlapping inputs are
    loaded once (a stride-1 window of 8 reads 8 inputs per output one at a time, 2.75 for 4 outputs)."""
    from kevolve.offline.space import POOL_RUNS

    s: PoolSpec = g.spec  # type: ignore[assignment]
    r = p.ilp if p.ilp in POOL_RUNS else 1
    while r > 1 and r > s.out_size[-1]:
        r //= 2
    return r


def _outer_loops(s: PoolSpec, lines: list[str]) -> None:
    """Window loops over every spatial dim but the last (max: their padding skipped; avg: clipped bounds)."""
    nd = len(s.kernel)
    for d in range(nd - 1):
        if s.op == "max":
            lines += [f"for (int k{d} = 0; k{d} < {s.kernel[d]}; ++k{d}) {{",
                      f"  const int i{d} = o{d} * {s.stride[d]} - {s.padding[d]} + k{d} * {s.dilation[d]};",
                      f"  if ((unsigned)i{d} >= {s.in_size[d]}u) continue;"]
        else:
            lines.append(f"for (int i{d} = b{d}; i{d} < e{d}; ++i{d}) {{")


def _last_dim(s: PoolSpec, r: int) -> list[str]:
    """Straight-line code over the last dim: each input the `r` windows read is loaded once and folded into
    every output whose window holds it (max: NaN propagates, padding skipped; avg: padding adds nothing)."""
    d = len(s.kernel) - 1
    span = (r - 1) * s.stride[d] + (s.kernel[d] - 1) * s.dilation[d] + 1
    uses: dict[int, list[int]] = {}
    for o in range(r):
        for k in range(s.kernel[d]):
            uses.setdefault(o * s.stride[d] + k * s.dilation[d], []).append(o)
    lines = [f"const int b_ = oL * {s.stride[d]} - {s.padding[d]};"]
    for j in range(span):
        if j not in uses:
            continue
        fold = [f"if (v > m{o} || isnan(v)) m{o} = v;" if s.op == "max" else f"acc{o} += v;" for o in uses[j]]
        lines.append(f"{{ const int i{d} = b_ + {j}; if ((unsigned)i{d} < {s.in_size[d]}u) {{ "
                     f"const float v = __ldg(xc + {_offset(s)}); {' '.join(fold)} }} }}")
    return lines


def _body(s: PoolSpec, r: int) -> list[str]:
    """Outputs oL .. oL + r - 1 of the last dim (those past its end are computed and not stored)."""
    nd = len(s.kernel)
    last = nd - 1
    lines: list[str] = []
    if s.op == "max":
        lines += [f"float m{o} = -INFINITY;" for o in range(r)]
    else:
        lines += [f"float acc{o} = 0.0f;" for o in range(r)]
        lines.append("int pool = 1, cnt = 1;")  # the outer dims' part of the divisors
        for d in range(last):
            lines += [f"int b{d} = o{d} * {s.stride[d]} - {s.padding[d]};",
                      f"int e{d} = min(b{d} + {s.kernel[d]}, {s.in_size[d] + s.padding[d]});",
                      f"pool *= e{d} - b{d};", f"b{d} = max(b{d}, 0); e{d} = min(e{d}, {s.in_size[d]});",
                      f"cnt *= e{d} - b{d};"]
    _outer_loops(s, lines)
    lines += _last_dim(s, r)
    lines += ["}"] * last
    for o in range(r):
        store = [f"if (oL + {o} < {s.out_size[last]}) {{"] if o else ["{"]
        if s.op == "max":
            store.append(f"out[ob + {o}] = m{o};")
        else:
            store += [f"int b_{o} = (oL + {o}) * {s.stride[last]} - {s.padding[last]};",
                      f"int e_{o} = min(b_{o} + {s.kernel[last]}, {s.in_size[last] + s.padding[last]});",
                      f"const int pool{o} = pool * (e_{o} - b_{o});",
                      f"b_{o} = max(b_{o}, 0); e_{o} = min(e_{o}, {s.in_size[last]});",
                      f"const int cnt{o} = cnt * (e_{o} - b_{o});"]
            div = str(s.divisor) if s.divisor else (f"pool{o}" if s.count_include_pad else f"cnt{o}")
            store.append(f"out[ob + {o}] = acc{o} / (float)({div});")
        lines.append(" ".join(store) + " }")
    return lines


def _offset(s: PoolSpec) -> str:
    off = "i0"
    for d in range(1, len(s.kernel)):
        off = f"({off}) * {s.in_size[d]} + i{d}"
    return off


def _groups(g: Group, r: int) -> int:
    """Work items: every output row's last dim in runs of `r`."""
    s: PoolSpec = g.spec  # type: ignore[assignment]
    return s.planes * math.prod(s.out_size[:-1]) * -(-s.out_size[-1] // r)


def kernel(name: str, g: Group, p: KernelParams) -> str:
    s: PoolSpec = g.spec  # type: ignore[assignment]
    nd = len(s.kernel)
    r = tile(g, p)
    idx = index_type(max(g.numel + r, s.planes * math.prod(s.in_size)))
    runs = -(-s.out_size[-1] // r)
    names = ["pl", *(f"o{d}" for d in range(nd - 1)), "og"]
    body = unravel("i", (s.planes, *s.out_size[:-1], runs), names, idx)
    body.append(f"const int oL = og * {r};")
    # ob: the flat index of output (pl, o..., oL); rows of the last dim are out_size[-1] long
    row = "pl"
    for d in range(nd - 1):
        row = f"({row}) * {s.out_size[d]}u + o{d}"
    body.append(f"const {idx} ob = ({idx})({row}) * {s.out_size[-1]}u + oL;")
    body.append(f"const float* xc = in0 + (unsigned long long)pl * {math.prod(s.in_size)}ull;")
    body += _body(s, r)
    return f"{signature(name, g, p)} {{\n{grid_stride(g, p, body, idx, count=_groups(g, r))}\n}}\n"


def _blocks(g: Group, p: KernelParams) -> int:
    """One thread per run of `tile` outputs along the last dim."""
    return -(-_groups(g, tile(g, p)) // p.block)


def twin(g: Group, leaves: list[torch.Tensor]) -> torch.Tensor:
    """Pooling as a gather by the kernel's index formulas, then max or sum / divisor."""
    s: PoolSpec = g.spec  # type: ignore[assignment]
    nd = len(s.kernel)
    x = leaves[0].reshape(1, s.planes, *s.in_size)
    kdims = tuple(range(-nd, 0))
    if s.op == "max":
        pt = window_patches(x, s.in_size, s.out_size, s.kernel, s.stride, s.padding, s.dilation, fill=-math.inf)
        return pt.amax(kdims).reshape(g.out_shape)
    pt = window_patches(x, s.in_size, s.out_size, s.kernel, s.stride, s.padding, s.dilation, fill=0.0)
    total = pt.sum(kdims)
    pool = torch.ones(s.out_size, dtype=torch.float32)
    cnt = torch.ones(s.out_size, dtype=torch.float32)
    for d in range(nd):
        b = torch.arange(s.out_size[d]) * s.stride[d] - s.padding[d]
        e = torch.clamp(b + s.kernel[d], max=s.in_size[d] + s.padding[d])
        view = [1] * nd
        view[d] = s.out_size[d]
        pool = pool * (e - b).reshape(view)
        cnt = cnt * (e.clamp(max=s.in_size[d]) - b.clamp(min=0)).reshape(view)
    div = float(s.divisor) if s.divisor else (pool if s.count_include_pad else cnt)
    return (total / div).reshape(g.out_shape)


KIND = DirectKind(find=_find, kernel=kernel, blocks=_blocks, twin=twin)
