"""A Triton implicit-GEMM convolution (1d / 2d / 3d, transposed or not, grouped, strided, padded, dilated),
with the element-wise chain after it fused into its epilogue.

The direct CUDA kernel (`conv.py`) sums each output in fp32 with FMAs, one thread per output: it reached
0.05–0.27× cuDNN on KernelBench level 1 (H100, 2026-11-25). This module offers the candidate kind `tconv`:
the convolution as a matrix product over (batch × output positions) rows, (output channels of a group)
columns and (input channels of the group × kernel window) depth, the input gathered tile by tile by the
same index formulas as the direct kernel (masked where the window leaves the input, or, transposed, where
the stride skips), on tensor cores. Precision is a searched setting: 'tf32' is what cuDNN runs PyTorch's
float32 convolutions in by default (so eager's own error, the evaluator's yardstick, is TF32-sized there);
'tf32x3' gives fp32-level error where eager's convolution ran in fp32; 'ieee' is plain fp32 FMA.

With an element-wise group right after the convolution (KernelBench level 2: bias, activations, scalings)
the group becomes the kernel's epilogue: each accumulator tile gets the chain before its only store, so the
convolution's output is never written and read back. The evaluator decides which kind is right and faster.

Layout 'library' keeps the convolution in the library (cuDNN) but on channels-last operands and without its
bias, as Inductor runs it; the kernel is then only the epilogue over the channels-last result (bias and chain
in one pass, stored in the module's layout). On the H100 it was tried on the 11 level-2 sample convolutions
with an element-wise group fused after them: it won 7 and led the search to an 8th (the implicit GEMM in nhwc).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.fx
from kevolve.kernel_params import KernelParams
from kevolve.offline.kernels_direct.conv import _CONV, ConvSpec
from kevolve.offline.graph.ir import Group
from kevolve.offline.graph.partition import Fused
from kevolve.offline.kernels_triton.triton_cl import big_offsets, channels_last_source, library_call
from kevolve.offline.kernels_triton.triton_launch import compile_kernel, launch_tail
from kevolve.offline.kernels_triton.triton_ops import emit, fp32_only, supported

KIND = "tconv"


@dataclass(frozen=True)
class TConvSpec:
    """A `tconv` group: the convolution, and the group leaf that stands for its output (-1 with no epilogue:
    leaves 0, 1 (and 2) are then input, weight (and bias), the output written as it is)."""

    conv: ConvSpec
    conv_leaf: int = -1
    operands: int = 2
    """launcher arguments before the epilogue's leaves: input, weight and the bias when there is one"""
    library_first: bool = False
    """a convolution the CUDA plan leaves to the library (its output feeds a fused group): the 'library' layout is
    its default even with no epilogue of its own (cuDNN channels-last without the bias, the bias added while the
    result is written in the module's layout, against cuDNN's NCHW call with its bias pass)"""

    @property
    def m(self) -> int:
        return self.conv.batch * math.prod(self.conv.out_size)

    @property
    def ocg(self) -> int:
        return self.conv.cout // self.conv.groups

    @property
    def k(self) -> int:
        return self.conv.cin // self.conv.groups * math.prod(self.conv.kernel)

    def __str__(self) -> str:
        c = self.conv
        what = f"{len(c.kernel)}d{' transposed' if c.transposed else ''}"
        return (f"{what} n={c.batch} cin={c.cin} cout={c.cout} groups={c.groups} in={list(c.in_size)} "
                f"k={list(c.kernel)} stride={list(c.stride)} pad={list(c.padding)} dil={list(c.dilation)}"
                + (" +epilogue" if self.conv_leaf >= 0 else ""))


def from_direct(fz: Fused, library_first: bool = False) -> Fused | None:
    """The direct `conv` group `fz` as a `tconv` group (same leaves and nodes), or None when it is no conv."""
    g = fz.group
    if g.kind != "conv":
        return None
    s: ConvSpec = g.spec  # type: ignore[assignment]
    spec = TConvSpec(conv=s, operands=3 if s.bias else 2, library_first=library_first)
    group = Group(shape=g.shape, reduce_dims=(), leaves=list(g.leaves), reductions=[], out=g.out, out_scope="elem",
                  out_shape=g.out_shape, nodes=list(g.nodes), kind=KIND, spec=spec)
    return Fused(group=group, nodes=list(fz.nodes), extra=list(fz.extra), leaf_refs=list(fz.leaf_refs))


def library_conv(gm: torch.fx.GraphModule, node: torch.fx.Node) -> Fused | None:
    """A `tconv` group for a convolution module the CUDA plan keeps as a library call."""
    from kevolve.offline.kernels_direct.conv import KIND as CONV

    if node.op != "call_module" or type(gm.get_submodule(str(node.target))) not in _CONV:
        return None
    fz = CONV.find(node, gm)
    return None if fz is None else from_direct(fz, library_first=True)


def fuse_epilogue(conv: Fused, fz: Fused) -> Fused | None:
    """`conv` (a bare `tconv` group) with the element-wise group `fz` after it as its epilogue, when `fz`
    reads the convolution's output exactly once, element for element, and nothing else reads it."""
    from kevolve.offline.graph.ir import contiguous_strides

    g = fz.group
    spec: TConvSpec = conv.group.spec  # type: ignore[assignment]
    node = conv.sink
    if not g.is_pointwise or not supported(g.out) or not fp32_only(g) or spec.conv_leaf >= 0:
        return None
    idx = [i for i, r in enumerate(fz.leaf_refs) if r is node]
    shape = conv.group.out_shape
    if len(idx) != 1 or tuple(g.shape) != tuple(shape) or g.leaves[idx[0]].strides != contiguous_strides(shape):
        return None
    if not set(node.users) <= set(fz.nodes) | set(fz.extra):
        return None
    i = idx[0]
    ops = list(conv.leaf_refs)
    epi_refs = [r for j, r in enumerate(fz.leaf_refs) if j != i]
    group = Group(shape=g.shape, reduce_dims=(), leaves=list(g.leaves), reductions=[], out=g.out, out_scope="elem",
                  out_shape=g.out_shape, nodes=[*conv.group.nodes, *g.nodes], kind=KIND,
                  spec=TConvSpec(conv=spec.conv, conv_leaf=i, operands=len(ops), library_first=spec.library_first))
    return Fused(group=group, nodes=[*conv.nodes, *fz.nodes], extra=list(fz.extra), leaf_refs=ops + epi_refs)


def pointer_args(group: Group) -> list[str]:
    """The kernel's tensor arguments, in order: input, weight, output, bias, epilogue leaves."""
    spec: TConvSpec = group.spec  # type: ignore[assignment]
    return ["X", "W", "Y", *(["BIAS"] if spec.conv.bias else []), *(f"L{i}" for i in _epilogue_leaves(group))]


def _epilogue_leaves(group: Group) -> list[int]:
    spec: TConvSpec = group.spec  # type: ignore[assignment]
    return [] if spec.conv_leaf < 0 else [i for i in range(len(group.leaves)) if i != spec.conv_leaf]


def constants(group: Group, p: KernelParams) -> tuple[dict[str, object], dict[str, int]]:
    """(the kernel's constexpr arguments, its launch options) for these parameters."""
    return ({"BLOCK_M": p.tile_m, "BLOCK_N": p.tile_n, "BLOCK_K": p.tile_k, "PREC": p.precision},
            {"num_warps": p.warps, "num_stages": p.stages})


def _unravel(var: str, sizes: tuple[int, ...], names: list[str]) -> list[str]:
    """Lines splitting flat `var` (row-major over `sizes`) into `names`, innermost by % and //."""
    lines, rest = [], var
    for i in range(len(sizes) - 1, 0, -1):
        lines.append(f"{names[i]} = {rest} % {sizes[i]}")
        lines.append(f"r_{names[i]} = {rest} // {sizes[i]}")
        rest = f"r_{names[i]}"
    lines.append(f"{names[0]} = {rest}")
    return lines


def kernel_source(name: str, group: Group, p: KernelParams) -> str:
    """The @triton.jit kernel: implicit-GEMM tiles over (rows, channels), gathered input, one masked store."""
    spec: TConvSpec = group.spec  # type: ignore[assignment]
    s = spec.conv
    nd = len(s.kernel)
    ocg = s.cout // s.groups
    osp = math.prod(s.out_size)
    ostr = [math.prod(s.out_size[d + 1:]) for d in range(nd)]
    L: list[str] = []
    # rows: (n, o_0 .. o_{nd-1}); columns: output channel rn of group g
    L += ["pid_m = tl.program_id(0)", "pid_n = tl.program_id(1)", "g = tl.program_id(2)",
          "rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)", "rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
          f"mmask = rm < {spec.m}", f"nmask = rn < {ocg}", f"rmc = rm % {spec.m}"]
    L += _unravel("rmc", (s.batch, *s.out_size), ["n", *(f"o{d}" for d in range(nd))])
    nb = "n.to(tl.int64)" if big_offsets(s) else "n"
    if p.layout == "library":  # X is the library's convolution, channels-last: [n, o..., cout]
        rows = "rmc.to(tl.int64)" if big_offsets(s) else "rmc"
        L += ["cmask = mmask[:, None] & nmask[None, :]",
              f"acc = tl.load(X + ({rows} * {s.cout})[:, None] + (g * {ocg} + rn)[None, :], mask=cmask, other=0.0)"]
    else:
        if not s.transposed:
            L += [f"ib{d} = o{d} * {s.stride[d]} - {s.padding[d]}" for d in range(nd)]
        else:
            L += [f"tb{d} = o{d} + {s.padding[d]}" for d in range(nd)]
        L.append("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        L += _nhwc_loop(spec, nb) if p.layout == "nhwc" else _flat_loop(spec)
        L.append("cmask = mmask[:, None] & nmask[None, :]")
    if s.bias:
        L.append(f"acc = acc + tl.load(BIAS + g * {ocg} + rn, mask=nmask, other=0.0)[None, :]")
    # output [n, cout, o...]: a row's part and a column's part of the flat offset
    ospat = " + ".join(f"o{d} * {ostr[d]}" if ostr[d] != 1 else f"o{d}" for d in range(nd))
    L.append(f"yrow = {nb} * {s.cout * osp} + {ospat}")
    L.append(f"ycol = (g * {ocg} + rn) * {osp}")
    res = "acc"
    if spec.conv_leaf >= 0:
        leaf = {spec.conv_leaf: "acc"}
        for i in _epilogue_leaves(group):
            off = _leaf_offset(group.leaves[i].strides, nd, nb, ocg)
            L.append(f"v{i} = tl.load(L{i} + {off}, mask=cmask, other=0.0)" if off != "0" else f"v{i} = tl.load(L{i})")
            leaf[i] = f"v{i}"
        lines, res = emit(group.out, leaf, "e")
        L += lines
    L.append(f"tl.store(Y + yrow[:, None] + ycol[None, :], {res}, mask=cmask)")
    body = "\n".join("    " + ln for ln in L)
    return f'''@triton.jit
def {name}({", ".join(pointer_args(group))},
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PREC: tl.constexpr):
    """{group.describe()}"""
{body}
''' + (channels_last_source(name + "_cl", s) if p.layout == "library" else "")


def _flat_loop(spec: TConvSpec) -> list[str]:
    """The main loop over NCHW input: one flat K loop over (channel, window), the window decoded per element."""
    s = spec.conv
    nd = len(s.kernel)
    icg, ocg = s.cin // s.groups, s.cout // s.groups
    isp, kvol = math.prod(s.in_size), math.prod(s.kernel)
    istr = [math.prod(s.in_size[d + 1:]) for d in range(nd)]
    nb = "n.to(tl.int64)" if big_offsets(s) else "n"
    L = [f"xrow = {nb} * {s.cin * isp} + g * {icg * isp}"]
    wbase = f"g * {icg * ocg * kvol}" if s.transposed else f"g * {ocg * icg * kvol}"
    L.append(f"wg = W + {wbase}")
    # indices past the end wrap with % (their lanes are masked): clamping them with tl.where(mask, rk, 0)
    # instead was miscompiled when the loop is software-pipelined (Triton 3.6, H100, 2026-11-25: 20-40 %
    # errors on 2-d convolutions with 2-3 stages, exact with 1 stage or with %)
    loop = ["rk = kb + tl.arange(0, BLOCK_K)", f"kmask = rk < {spec.k}", f"rkc = rk % {spec.k}"]
    loop += _unravel("rkc", (icg, *s.kernel), ["c", *(f"k{d}" for d in range(nd))])
    valid = ["mmask[:, None]", "kmask[None, :]"]
    xoff = [f"(c * {isp})[None, :]"]
    for d in range(nd):
        lines, ok = _window_index(s, d, f"ib{d}[:, None] + (k{d} * {s.dilation[d]})[None, :]",
                                  f"tb{d}[:, None] - (k{d} * {s.dilation[d]})[None, :]")
        loop += lines
        valid += ok
        xoff.append(f"i{d} * {istr[d]}" if istr[d] != 1 else f"i{d}")
    loop.append(f"valid = {' & '.join(valid)}")
    loop.append(f"a = tl.load(X + xrow[:, None] + {' + '.join(xoff)}, mask=valid, other=0.0)")
    if s.transposed:  # weight [cin, cout / groups, k...]
        woff = f"(c * {ocg * kvol} + {_kflat(nd, s.kernel)})[:, None] + (rn * {kvol})[None, :]"
    else:  # weight [cout, cin / groups, k...]: a row per output channel, K long
        woff = f"rkc[:, None] + (rn * {spec.k})[None, :]"
    loop += [f"b = tl.load(wg + {woff}, mask=kmask[:, None] & nmask[None, :], other=0.0)",
             "acc = tl.dot(a, b, acc, input_precision=PREC)"]
    L.append(f"for kb in range(0, {spec.k}, BLOCK_K):")  # k0, k1 … are window offsets
    L += ["    " + ln for ln in loop]
    return L


def _nhwc_loop(spec: TConvSpec, nb: str) -> list[str]:
    """The main loop over channels-last input (the launcher makes it, and reorders the weight so a group's
    channels are innermost): for each window offset, the rows' validity and spatial offset once, then the
    group's input channels in BLOCK_K steps, contiguous in memory on both operands (vector loads)."""
    s = spec.conv
    nd = len(s.kernel)
    icg, ocg = s.cin // s.groups, s.cout // s.groups
    kvol = math.prod(s.kernel)
    istr = [math.prod(s.in_size[d + 1:]) for d in range(nd)]
    L = [f"xrow = {nb} * {s.cin * math.prod(s.in_size)} + g * {icg}",
         f"wg = W + g * {icg * ocg * kvol}", f"for kk in range(0, {kvol}):"]
    body = _unravel("kk", s.kernel, [f"k{d}" for d in range(nd)])
    valid = ["mmask"]
    for d in range(nd):
        lines, ok = _window_index(s, d, f"ib{d} + k{d} * {s.dilation[d]}", f"tb{d} - k{d} * {s.dilation[d]}")
        body += lines
        valid += ok
    sp = " + ".join(f"i{d} * {istr[d]}" if istr[d] != 1 else f"i{d}" for d in range(nd))
    body += [f"rv = {' & '.join(valid)}", f"xsp = xrow + ({sp}) * {s.cin}",
             f"for c0 in range(0, {icg}, BLOCK_K):"]
    if s.transposed:  # weight reordered to [groups, window, cin / groups, cout / groups]
        woff = f"((kk * {icg} + rc) * {ocg})[:, None] + rn[None, :]"
    else:  # weight reordered to [cout, window, cin / groups]
        woff = f"(kk * {icg} + rc)[:, None] + (rn * {icg * kvol})[None, :]"
    inner = ["rc = c0 + tl.arange(0, BLOCK_K)", f"cm = rc < {icg}",
             "a = tl.load(X + xsp[:, None] + rc[None, :], mask=rv[:, None] & cm[None, :], other=0.0)",
             f"b = tl.load(wg + {woff}, mask=cm[:, None] & nmask[None, :], other=0.0)",
             "acc = tl.dot(a, b, acc, input_precision=PREC)"]
    body += ["    " + ln for ln in inner]
    return L + ["    " + ln for ln in body]


def _window_index(s: ConvSpec, d: int, direct: str, transposed: str) -> tuple[list[str], list[str]]:
    """Lines computing input index i{d} of window dimension d (from `direct`, or for a transposed convolution
    from t{d} = `transposed`), and the conditions under which it reads the input."""
    if not s.transposed:
        return [f"i{d} = {direct}"], [f"(i{d} >= 0)", f"(i{d} < {s.in_size[d]})"]
    if s.stride[d] == 1:
        return [f"t{d} = {transposed}", f"i{d} = t{d}"], [f"(i{d} >= 0)", f"(i{d} < {s.in_size[d]})"]
    # shifted by a multiple of the stride before % and //: no negative operands (C and Python round those
    # differently), and no tl.where on an index (see `_flat_loop`'s rkc)
    q = -(-(s.kernel[d] - 1) * s.dilation[d] // s.stride[d])  # t >= -(kernel - 1) * dilation
    return ([f"t{d} = {transposed}", f"tp{d} = t{d} + {q * s.stride[d]}", f"i{d} = tp{d} // {s.stride[d]} - {q}"],
            [f"(t{d} >= 0)", f"(tp{d} % {s.stride[d]} == 0)", f"(i{d} < {s.in_size[d]})"])


def _kflat(nd: int, kernel: tuple[int, ...]) -> str:
    """The flat window offset of (k0 .. k{nd-1})."""
    out = "k0"
    for d in range(1, nd):
        out = f"({out}) * {kernel[d]} + k{d}"
    return out


def _leaf_offset(strides: tuple[int, ...], nd: int, nb: str, ocg: int) -> str:
    """Offset of an epilogue leaf from its strides over the output's (n, c, o...) dims: a row part over
    (n, o...) and a column part over the channel."""
    if not strides:
        return "0"
    rows = [f"{nb} * {strides[0]}"] if strides[0] else []
    rows += [f"o{d} * {strides[2 + d]}" for d in range(nd) if strides[2 + d]]
    col = f"((g * {ocg} + rn) * {strides[1]})[None, :]" if strides[1] else ""
    parts = ([f"({' + '.join(rows)})[:, None]"] if rows else []) + ([col] if col else [])
    return " + ".join(parts) or "0"


def grid(group: Group, p: KernelParams) -> tuple[int, int, int]:
    spec: TConvSpec = group.spec  # type: ignore[assignment]
    return (-(-spec.m // p.tile_m), -(-spec.ocg // p.tile_n), spec.conv.groups)


def launcher_source(fz: Fused, k: int, name: str, p: KernelParams) -> str:
    """Python launcher of a `tconv` group: contiguous operands and leaves, the output, the launch."""
    g = fz.group
    spec: TConvSpec = g.spec  # type: ignore[assignment]
    n_epi = len(_epilogue_leaves(g))
    ops = [f"a{i}" for i in range(spec.operands)]
    epi = [f"e{i}" for i in range(n_epi)]
    epi_specs = [g.leaves[i] for i in _epilogue_leaves(g)]
    lines = [f"def _kv_launch_{k}({', '.join(ops + epi)}):", f'    """{g.describe()}"""']
    if p.layout == "library":  # the library's convolution (no bias: the kernel adds it) on channels-last operands
        lines += library_call(spec.conv, name)
        lines += [f"    {a} = {a}.contiguous()" for a in ops[2:]]
    else:
        lines += [f"    {a} = {a}.contiguous()" for a in ops]
    if p.layout == "nhwc":  # channels last, and the weight with a group's channels innermost (`_nhwc_loop`)
        s = spec.conv
        icg, ocg, kvol = s.cin // s.groups, s.cout // s.groups, math.prod(s.kernel)
        lines.append("    a0 = a0.movedim(1, -1).contiguous()")
        lines.append(f"    a1 = a1.reshape({s.groups}, {icg}, {ocg}, {kvol}).permute(0, 3, 1, 2).contiguous()"
                     if s.transposed else f"    a1 = a1.reshape({s.cout}, {icg}, {kvol}).transpose(1, 2).contiguous()")
    lines.append("    dev = a0.device")
    args = ["a0", "a1", "out", *ops[2:], *epi]
    lines += launch_tail(name, repr(grid(g, p)), args, g, epi, epi_specs, constants(g, p))
    return "\n".join(lines) + "\n"


def conv_output(group: Group, operands: list[torch.Tensor]) -> torch.Tensor:
    """The convolution a `tconv` group computes, with torch (the CPU twin of its main loop)."""
    from kevolve.offline.kernels_direct.conv import KIND as CONV

    spec: TConvSpec = group.spec  # type: ignore[assignment]
    s = spec.conv
    g = Group(shape=(s.batch, s.cout, *s.out_size), reduce_dims=(), leaves=[], reductions=[], out=group.out,
              out_scope="elem", out_shape=(s.batch, s.cout, *s.out_size), kind="conv", spec=s)
    return CONV.twin(g, operands)


def compile_for(kernel: object, group: Group, p: KernelParams, arch: int = 90) -> dict[str, str]:
    """Compile a generated kernel for `arch` without a GPU; the stages' text by name (ttir … ptx, cubin)."""
    consts, opts = constants(group, p)
    sig = {a: "*fp32" for a in pointer_args(group)} | dict.fromkeys(consts, "constexpr")
    return compile_kernel(kernel, sig, consts, opts, arch)




__all__ = ["KIND", "TConvSpec", "compile_for", "constants", "conv_output", "from_direct",
           "fuse_epilogue", "kernel_source", "launcher_source", "library_conv", "pointer_args"]
