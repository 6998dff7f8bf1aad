"""Direct convolution kernels (1d / 2d / 3d, transposed or not, grouped, strided, padded, dilated).

One thread per output element sums over its group's input channels and the kernel window, in fp32
with fused multiply-adds (no TF32), weights read through the read-only cache. Much slower than
cuDNN, so it is used only for modules that are nothing but convolutions (KernelBench level 1): a
verified candidate there, where the alternative is none. With anything to fuse after them,
convolutions stay cuDNN calls and the chain becomes their epilogue.
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
    param,
    signature,
    unravel,
    window_patches,
)
from kevolve.offline.graph.ir import Group
from kevolve.offline.graph.partition import Fused
from kevolve.offline.graph.meta import node_dtype, node_shape
from torch import nn

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


@dataclass(frozen=True)
class ConvSpec:
    """Sizes and settings of one convolution; tuples have one entry per spatial dim."""

    transposed: bool
    batch: int
    cin: int
    cout: int
    groups: int
    in_size: tuple[int, ...]
    out_size: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    output_padding: tuple[int, ...]
    bias: bool


def _find(node: torch.fx.Node, gm: torch.fx.GraphModule) -> Fused | None:
    if node.op != "call_module" or len(node.args) != 1 or node.kwargs:
        return None
    mod = gm.get_submodule(str(node.target))
    if type(mod) not in _CONV or mod.padding_mode != "zeros" or isinstance(mod.padding, str):
        return None
    x = node.args[0]
    sx, so = (node_shape(x), node_shape(node)) if isinstance(x, torch.fx.Node) else (None, None)
    if sx is None or so is None or len(sx) != 2 + len(mod.kernel_size) or node_dtype(x) != torch.float32:
        return None
    transposed = isinstance(mod, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d))
    spec = ConvSpec(transposed, sx[0], sx[1], so[1], mod.groups, tuple(sx[2:]), tuple(so[2:]), tuple(mod.kernel_size),
                    tuple(mod.stride), tuple(mod.padding), tuple(mod.dilation),
                    tuple(mod.output_padding) if transposed else (0,) * len(mod.kernel_size), mod.bias is not None)
    refs = [x, param(gm, node, "weight")] + ([param(gm, node, "bias")] if spec.bias else [])
    return make_group("conv", spec, [node], refs, so)


def tile(g: Group, p: KernelParams) -> int:
    """Output channels per thread: the largest of 4, 2, 1 that is at most `p.ilp` and divides the
    channels of a group (each input value read is then used for that many outputs)."""
    s: ConvSpec = g.spec  # type: ignore[assignment]
    return next(t for t in (4, 2, 1) if t <= max(1, p.ilp) and (s.cout // s.groups) % t == 0)


def _window(s: ConvSpec, p: KernelParams, t: int, wstep: int) -> list[str]:
    """Nested loops over the kernel window; the innermost body accumulates into acc[0 .. t-1]."""
    nd = len(s.kernel)
    lines: list[str] = []
    for d in range(nd):
        if d == nd - 1:
            lines.append(f"#pragma unroll {p.unroll}" if p.unroll > 1 else "#pragma unroll 1")
        lines.append(f"for (int k{d} = 0; k{d} < {s.kernel[d]}; ++k{d}) {{")
        if s.transposed:
            lines += [f"  const int t{d} = o{d} + {s.padding[d]} - k{d} * {s.dilation[d]};",
                      f"  if (t{d} < 0 || t{d} % {s.stride[d]} != 0) continue;",
                      f"  const int i{d} = t{d} / {s.stride[d]};",
                      f"  if (i{d} >= {s.in_size[d]}) continue;"]
        else:
            lines += [f"  const int i{d} = o{d} * {s.stride[d]} - {s.padding[d]} + k{d} * {s.dilation[d]};",
                      f"  if ((unsigned)i{d} >= {s.in_size[d]}u) continue;"]
    xoff, koff = "i0", "k0"
    for d in range(1, nd):
        xoff = f"({xoff}) * {s.in_size[d]} + i{d}"
        koff = f"({koff}) * {s.kernel[d]} + k{d}"
    lines += [f"const float xv = __ldg(xc + {xoff});", f"const int kk = {koff};", "#pragma unroll",
              f"for (int j = 0; j < {t}; ++j) acc[j] = fmaf(xv, __ldg(wc + j * {wstep} + kk), acc[j]);"]
    lines += ["}"] * nd
    return lines


def kernel(name: str, g: Group, p: KernelParams) -> str:
    s: ConvSpec = g.spec  # type: ignore[assignment]
    nd, t = len(s.kernel), tile(g, p)
    idx = index_type(g.numel)
    icg, ocg = s.cin // s.groups, s.cout // s.groups
    in_sp, kvol, out_sp = math.prod(s.in_size), math.prod(s.kernel), math.prod(s.out_size)
    names = ["n", "ot", *(f"o{d}" for d in range(nd))]
    body = unravel("i", (s.batch, s.cout // t, *s.out_size), names, idx)
    ospat = "o0"
    for d in range(1, nd):
        ospat = f"({ospat}) * {s.out_size[d]} + o{d}"
    body += [f"const int oc = ot * {t};", f"const int g = oc / {ocg};", f"float acc[{t}];", "#pragma unroll",
             f"for (int j = 0; j < {t}; ++j) acc[j] = 0.0f;"]
    if s.transposed:  # weight [cin, cout / groups, k...]: output channel oc + j is kvol further on
        wstep = kvol
        body += [f"for (int c = 0; c < {icg}; ++c) {{",
                 f"  const int ic = g * {icg} + c;",
                 f"  const float* xc = in0 + ((unsigned long long)n * {s.cin} + ic) * {in_sp}ull;",
                 f"  const float* wc = in1 + ((unsigned long long)ic * {ocg} + (oc - g * {ocg})) * {kvol}ull;"]
    else:  # weight [cout, cin / groups, k...]: output channel oc + j is icg * kvol further on
        wstep = icg * kvol
        body += [f"for (int c = 0; c < {icg}; ++c) {{",
                 f"  const float* xc = in0 + ((unsigned long long)n * {s.cin} + g * {icg} + c) * {in_sp}ull;",
                 f"  const float* wc = in1 + ((unsigned long long)oc * {icg} + c) * {kvol}ull;"]
    body += ["  " + ln for ln in _window(s, p, t, wstep)] + ["}"]
    body += [f"const unsigned long long ob = ((unsigned long long)n * {s.cout} + oc) * {out_sp}ull + ({ospat});",
             "#pragma unroll", f"for (int j = 0; j < {t}; ++j) "
             + (f"out[ob + j * {out_sp}ull] = acc[j] + __ldg(in2 + oc + j);" if s.bias else
                f"out[ob + j * {out_sp}ull] = acc[j];")]
    return f"{signature(name, g, p)} {{\n{grid_stride(g, p, body, idx, g.numel // t)}\n}}\n"


def blocks(g: Group, p: KernelParams) -> int:
    """One thread per `tile` outputs."""
    return -(-(g.numel // tile(g, p)) // p.block)


def twin(g: Group, leaves: list[torch.Tensor]) -> torch.Tensor:
    """The convolution as a gather by the kernel's index formulas and a product with the weight."""
    s: ConvSpec = g.spec  # type: ignore[assignment]
    nd = len(s.kernel)
    x, w = leaves[0].reshape(s.batch, s.cin, *s.in_size), leaves[1]
    icg, ocg = s.cin // s.groups, s.cout // s.groups
    pt = window_patches(x, s.in_size, s.out_size, s.kernel, s.stride, s.padding, s.dilation,
                        s.transposed).reshape(s.batch, s.groups, icg, math.prod(s.out_size), math.prod(s.kernel))
    if s.transposed:  # weight [cin, cout / groups, k...]
        wg = w.reshape(s.groups, icg, ocg, math.prod(s.kernel))
        out = torch.einsum("ngcok,gcdk->ngdo", pt, wg)
    else:  # weight [cout, cin / groups, k...]
        wg = w.reshape(s.groups, ocg, icg, math.prod(s.kernel))
        out = torch.einsum("ngcok,gdck->ngdo", pt, wg)
    out = out.reshape(s.batch, s.cout, *s.out_size)
    if s.bias:
        out = out + leaves[2].reshape(1, s.cout, *([1] * nd))
    return out


KIND = DirectKind(find=_find, kernel=kernel, blocks=blocks, twin=twin)
