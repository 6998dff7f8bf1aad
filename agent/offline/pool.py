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
from kevolve.agent.offline.direct import (
    DirectKind,
    grid_stride,
    index_type,
    make_group,
    per_output_blocks,
    signature,
    unravel,
    window_patches,
)
from kevolve.agent.offline.ir import Group
from kevolve.agent.offline.partition import Fused
from kevolve.agent.offline.space import KernelParams
from kevolve.agent.offline.trace import node_dtype, node_shape
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


def _max_body(s: PoolSpec, p: KernelParams) -> list[str]:
    nd = len(s.kernel)
    lines = ["float m = -INFINITY;"]
    for d in range(nd):
        if d == nd - 1:
            lines.append(f"#pragma unroll {p.unroll}" if p.unroll > 1 else "#pragma unroll 1")
        lines += [f"for (int k{d} = 0; k{d} < {s.kernel[d]}; ++k{d}) {{",
                  f"  const int i{d} = o{d} * {s.stride[d]} - {s.padding[d]} + k{d} * {s.dilation[d]};",
                  f"  if ((unsigned)i{d} >= {s.in_size[d]}u) continue;"]
    lines += [f"const float v = __ldg(xc + {_offset(s)});", "if (v > m || isnan(v)) m = v;"]
    lines += ["}"] * nd + ["out[i] = m;"]
    return lines


def _avg_body(s: PoolSpec, p: KernelParams) -> list[str]:
    nd = len(s.kernel)
    lines = ["float acc = 0.0f;", "int pool = 1, cnt = 1;"]
    for d in range(nd):
        lines += [f"int b{d} = o{d} * {s.stride[d]} - {s.padding[d]};",
                  f"int e{d} = min(b{d} + {s.kernel[d]}, {s.in_size[d] + s.padding[d]});",
                  f"pool *= e{d} - b{d};", f"b{d} = max(b{d}, 0); e{d} = min(e{d}, {s.in_size[d]});",
                  f"cnt *= e{d} - b{d};"]
    for d in range(nd):
        if d == nd - 1:
            lines.append(f"#pragma unroll {p.unroll}" if p.unroll > 1 else "#pragma unroll 1")
        lines.append(f"for (int i{d} = b{d}; i{d} < e{d}; ++i{d}) {{")
    lines += [f"acc += __ldg(xc + {_offset(s)});"] + ["}"] * nd
    div = str(s.divisor) if s.divisor else ("pool" if s.count_include_pad else "cnt")
    lines.append(f"out[i] = acc / (float)({div});")
    return lines


def _offset(s: PoolSpec) -> str:
    off = "i0"
    for d in range(1, len(s.kernel)):
        off = f"({off}) * {s.in_size[d]} + i{d}"
    return off


def kernel(name: str, g: Group, p: KernelParams) -> str:
    s: PoolSpec = g.spec  # type: ignore[assignment]
    nd = len(s.kernel)
    idx = index_type(max(g.numel, s.planes * math.prod(s.in_size)))
    body = unravel("i", (s.planes, *s.out_size), ["pl", *(f"o{d}" for d in range(nd))], idx)
    body.append(f"const float* xc = in0 + (unsigned long long)pl * {math.prod(s.in_size)}ull;")
    body += _max_body(s, p) if s.op == "max" else _avg_body(s, p)
    return f"{signature(name, g, p)} {{\n{grid_stride(g, p, body, idx)}\n}}\n"


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


KIND = DirectKind(find=_find, kernel=kernel, blocks=per_output_blocks, twin=twin)
