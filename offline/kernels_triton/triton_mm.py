"""A Triton matrix product with the element-wise chain after it fused into its epilogue.

The CUDA path keeps a product as a cuBLAS call and runs the chain after it as a second kernel, which
reads and writes the product's output once more. This module offers the alternative candidate kind
`mm`: one Triton kernel computes the product tile by tile and applies the chain (bias, activations,
scalings, residual inputs) to each tile before its only store. Tiles, warps, pipeline stages and the
product's precision are tunable (`KernelParams.tile_m/tile_n/tile_k/warps/stages/precision`):
'ieee' is plain fp32 FMA; 'tf32x3' splits each operand into two TF32 parts and keeps three tensor-core
products, which gives fp32-level error (the evaluator's fp32 tolerance) at tensor-core speed.
The evaluator decides which of the two candidate kinds, and which precision, is right and faster.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import torch
import torch.fx
import torch.nn.functional as F
from kevolve.kernel_params import KernelParams
from kevolve.offline.graph.canon import ParamRef
from kevolve.offline.kernels_direct.gemm import GemmShape
from kevolve.offline.graph.ir import Group, Leaf, LeafSpec, contiguous_strides
from kevolve.offline.graph.partition import Fused
from kevolve.offline.space import bare_product
from kevolve.offline.graph.meta import node_dtype, node_shape
from kevolve.offline.kernels_triton import triton_conv
from kevolve.offline.kernels_triton.triton_launch import compile_kernel, launch_tail
from kevolve.offline.kernels_triton.triton_ops import emit, fp32_only, supported

_MATMUL = {torch.matmul, torch.mm, torch.bmm, operator.matmul}


@dataclass(frozen=True)
class MMSpec:
    """The product of an `mm` group: C = A @ B (+ bias), then the epilogue over the group's leaves.

    `b_layout` 'kn': B is stored as (…, K, N); 'nk': B is a Linear weight (N, K) used transposed.
    `mm_leaf`: the group leaf that stands for the product (the epilogue reads it from registers).
    """

    gemm: GemmShape
    b_layout: str
    bias: bool
    mm_leaf: int

    @property
    def operands(self) -> int:
        """Launcher arguments before the epilogue's leaves: A, B and the bias when there is one."""
        return 3 if self.bias else 2


@dataclass(frozen=True)
class _Product:
    node: torch.fx.Node
    refs: list
    shape: GemmShape
    b_layout: str
    bias: bool


def _fp32(v: object) -> bool:
    if isinstance(v, ParamRef):
        return True
    return isinstance(v, torch.fx.Node) and node_dtype(v) == torch.float32


def _product(gm: torch.fx.GraphModule, node: torch.fx.Node) -> _Product | None:
    """The fp32 product `node` computes, if it is a Linear layer, F.linear, a 2-D or batched matmul, or an
    N-d by 2-d matmul (its leading dims flattened into rows)."""
    out = node_shape(node)
    if out is None or node_dtype(node) != torch.float32:
        return None
    if node.op == "call_module" and type(gm.get_submodule(str(node.target))) in _CONVS:
        return _pointwise_conv(node, gm.get_submodule(str(node.target)), out)
    if node.op == "call_module" and type(gm.get_submodule(str(node.target))) is torch.nn.Linear:
        mod = gm.get_submodule(str(node.target))
        x = node.args[0] if len(node.args) == 1 and not node.kwargs else None
        w = ParamRef(f"{node.target}.weight", tuple(mod.weight.shape))
        b = None if mod.bias is None else ParamRef(f"{node.target}.bias", tuple(mod.bias.shape))
        return _linear(node, x, w, b, out)
    if node.op == "call_function" and node.target is F.linear and not node.kwargs:
        x, w, b = (list(node.args) + [None, None])[:3]
        return _linear(node, x, w, b, out)
    is_mm = (node.op == "call_function" and node.target in _MATMUL) or (
        node.op == "call_method" and node.target in ("matmul", "mm", "bmm"))
    if not is_mm or len(node.args) != 2 or node.kwargs or not all(_fp32(a) for a in node.args):
        return None
    a, b = node.args
    sa, sb = node_shape(a), node_shape(b)
    if sa is None or sb is None:
        return None
    if len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0]:
        return _Product(node, [a, b], GemmShape(1, sa[0], sb[1], sa[1], False, False), "kn", False)
    if len(sa) == 3 and len(sb) == 3 and sa[0] == sb[0] and sa[2] == sb[1]:
        return _Product(node, [a, b], GemmShape(sa[0], sa[1], sb[2], sa[2], True, True), "kn", False)
    if len(sa) > 2 and len(sb) == 2 and sa[-1] == sb[0]:  # (..., K) @ (K, N): the leading dims are M's
        # (KernelBench L1 11's einsum 'bijl,lk->bijk', decomposed into this matmul: the CUDA plan's own GEMM
        # read 0.54x eager on the H100; the launcher reshapes A to (M, K))
        return _Product(node, [a, b], GemmShape(1, math.prod(sa[:-1]), sb[1], sa[-1], False, False), "kn", False)
    return None


_CONVS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)


def _pointwise_conv(node: torch.fx.Node, mod: torch.nn.Module, out: tuple[int, ...]) -> _Product | None:
    """A 1x1 convolution without bias (KernelBench L1 87) as the batched product weight (Cout, Cin) @ x[n]
    (Cin, positions): NCHW input and output are already the operand and result of that product, so the
    launcher only reshapes. cuDNN runs it at the memory roofline; the implicit-GEMM Triton convolution read 0.38x
    of it on the H100 (its index decoding per element), the direct CUDA kernel 0.12x."""
    x = node.args[0] if len(node.args) == 1 and not node.kwargs else None
    if not isinstance(x, torch.fx.Node) or not _fp32(x) or mod.bias is not None or mod.groups != 1:
        return None
    if mod.padding_mode != "zeros" or isinstance(mod.padding, str) or any(v != 1 for v in mod.kernel_size) \
            or any(v != 1 for v in mod.stride) or any(v != 0 for v in mod.padding):
        return None
    sx = node_shape(x)
    if sx is None or len(sx) != 2 + len(mod.kernel_size) or out != (sx[0], mod.out_channels, *sx[2:]):
        return None
    w = ParamRef(f"{node.target}.weight", tuple(mod.weight.shape))
    return _Product(node, [w, x], GemmShape(sx[0], mod.out_channels, math.prod(sx[2:]), sx[1], False, True), "kn",
                    False)


def _linear(node: torch.fx.Node, x: object, w: object, b: object, out: tuple[int, ...]) -> _Product | None:
    if not isinstance(x, torch.fx.Node) or not _fp32(x) or not _fp32(w) or (b is not None and not _fp32(b)):
        return None
    sx = node_shape(x)
    sw = w.shape if isinstance(w, ParamRef) else node_shape(w)  # type: ignore[arg-type]
    if sx is None or sw is None or len(sx) != 2 or len(sw) != 2 or sx[1] != sw[1] or out != (sx[0], sw[0]):
        return None
    refs = [x, w] + ([b] if b is not None else [])
    return _Product(node, refs, GemmShape(1, sx[0], sw[0], sx[1], False, False), "nk", b is not None)


def _mm_group(prod: _Product, epi: Group | None, epi_nodes: list[str], mm_leaf: int) -> Group:
    s = prod.shape
    shape = (s.m, s.n) if s.batch == 1 else (s.batch, s.m, s.n)
    if epi is None:
        leaves, out, out_shape = [LeafSpec(prod.node.name, contiguous_strides(shape))], Leaf(0), node_shape(prod.node)
    else:
        leaves, out, out_shape = list(epi.leaves), epi.out, epi.out_shape
    assert out_shape is not None
    return Group(shape=shape, reduce_dims=(), leaves=leaves, reductions=[], out=out, out_scope="elem",
                 out_shape=out_shape, nodes=[prod.node.name, *epi_nodes], kind="mm", gemm=s,
                 spec=MMSpec(gemm=s, b_layout=prod.b_layout, bias=prod.bias, mm_leaf=mm_leaf))


def _fuse_one(gm: torch.fx.GraphModule, fz: Fused) -> Fused | None:
    """`fz` (a pointwise group) with the product it reads folded in, if it reads exactly one it can own."""
    g = fz.group
    if not g.is_pointwise or not supported(g.out) or not fp32_only(g):
        return None
    prods = [(i, r) for i, r in enumerate(fz.leaf_refs) if isinstance(r, torch.fx.Node) and _product(gm, r)]
    if len(prods) != 1:
        return None
    i, node = prods[0]
    prod = _product(gm, node)
    assert prod is not None
    s = prod.shape
    shape = (s.m, s.n) if s.batch == 1 else (s.batch, s.m, s.n)
    members = {n for n in fz.nodes} | set(fz.extra)
    if g.shape != shape or g.leaves[i].strides != contiguous_strides(shape) or not set(node.users) <= members:
        return None
    group = _mm_group(prod, g, list(g.nodes), i)
    refs = prod.refs + [r for j, r in enumerate(fz.leaf_refs) if j != i]
    return Fused(group=group, nodes=[node, *fz.nodes], extra=list(fz.extra), leaf_refs=refs)


def triton_groups(gm: torch.fx.GraphModule, fused: list[Fused]) -> list[Fused] | None:
    """The fused list with every fp32 product made an `mm` group and every convolution a `tconv` group
    (`triton_conv.py`): with the element-wise group after it as its epilogue where there is one, alone
    otherwise (a row kernel or a library call follows); None when the graph has no product or convolution
    to take over."""
    out, owned = [], set()
    for fz in fused:
        new = None
        if fz.group.kind == "gemm":
            prod = _product(gm, fz.sink)
            new = None if prod is None else _bare(prod)
        elif fz.group.kind == "conv":  # a 1x1 convolution is a product; any other one an implicit GEMM
            prod = _product(gm, fz.sink)
            new = _bare(prod) if prod is not None else triton_conv.from_direct(fz)
        elif fz.group.kind == "fused":
            new = _fuse_one(gm, fz) or _fuse_conv(gm, fz)
        if new is not None:
            owned.add(new.nodes[0])
        out.append(new or fz)
    for n in gm.graph.nodes:
        if n in owned or n.op == "placeholder":
            continue
        prod = _product(gm, n)
        new = _bare(prod) if prod is not None else triton_conv.library_conv(gm, n)
        if new is not None:
            out.append(new)
            owned.add(n)
    if not owned:
        return None
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    return sorted(out, key=lambda f: order[f.sink])


def _fuse_conv(gm: torch.fx.GraphModule, fz: Fused) -> Fused | None:
    """`fz` (a pointwise group) as the epilogue of the one library convolution it reads, if it can own it."""
    convs = [c for r in fz.leaf_refs if isinstance(r, torch.fx.Node)
             and (c := triton_conv.library_conv(gm, r)) is not None]
    return triton_conv.fuse_epilogue(convs[0], fz) if len(convs) == 1 else None


def _bare(prod: _Product) -> Fused:
    """A product with no epilogue (its output is written as it is)."""
    return Fused(group=_mm_group(prod, None, [], 0), nodes=[prod.node], extra=[], leaf_refs=list(prod.refs))


def _leaf_offset(strides: tuple[int, ...]) -> str:
    """Offset expression of an epilogue leaf over (batch, rows, cols) from its strides over the group shape."""
    full = (0, *strides) if len(strides) == 2 else strides
    terms = [f"{v} * {st}" for v, st in zip(("bat", "rm[:, None]", "rn[None, :]"), full, strict=True) if st]
    return " + ".join(terms) or "0"


def _hinted(v: str, block: str, whole: bool) -> str:
    """Contiguity hints only where every tile is whole (a wrapped tile is not contiguous)."""
    return f"tl.max_contiguous(tl.multiple_of({v}, {block}), {block})" if whole else v


INT_ARGS = ("M", "N", "K", "s_ab", "s_am", "s_ak", "s_bb", "s_bk", "s_bn")


def pointer_args(group: Group) -> list[str]:
    """The kernel's tensor arguments, in order: operands, output, bias, epilogue leaves."""
    spec: MMSpec = group.spec  # type: ignore[assignment]
    epi = [i for i in range(len(group.leaves)) if i != spec.mm_leaf]
    return ["A", "B", "C", *(["BIAS"] if spec.bias else []), *(f"L{i}" for i in epi)]


def constants(group: Group, p: KernelParams) -> tuple[dict[str, object], dict[str, int]]:
    """(the kernel's constexpr arguments, its launch options) for these parameters."""
    s = group.gemm
    consts = {"BLOCK_M": p.tile_m, "BLOCK_N": p.tile_n, "BLOCK_K": p.tile_k, "GROUP_M": 8,
              "EVEN_K": s.k % p.tile_k == 0, "PREC": p.precision}
    if p.split_k > 1:
        consts["SPLIT_K"] = p.split_k
    return consts, {"num_warps": p.warps, "num_stages": p.stages}


def kernel_source(name: str, group: Group, p: KernelParams) -> str:
    """The @triton.jit kernel: tiled product, bias, epilogue, one masked store."""
    spec: MMSpec = group.spec  # type: ignore[assignment]
    epi = [i for i in range(len(group.leaves)) if i != spec.mm_leaf]
    args = pointer_args(group)
    leaf = {spec.mm_leaf: "acc"}
    loads = []
    for i in epi:
        off = _leaf_offset(group.leaves[i].strides)
        loads.append(f"    v{i} = tl.load(L{i} + {off}, mask=cmask, other=0.0)" if off != "0" else f"    v{i} = tl.load(L{i})")
        leaf[i] = f"v{i}"
    lines, res = emit(group.out, leaf, "e")
    bias = ["    acc = acc + tl.load(BIAS + rn[None, :], mask=rn[None, :] < N, other=0.0)"] if spec.bias else []
    # K in slices (a bare product, `space.auto_split`): program (tile, batch, slice) adds its slice's partial
    # product into the output the launcher zeroed, the bias once (by slice 0)
    split = p.split_k > 1
    if split and not bare_product(group):  # partial sums meet in the output: no epilogue can run on them
        raise ValueError(f"K slices asked of a product with an epilogue: {group.describe()}")
    steps = ("\n    steps = tl.cdiv(K, BLOCK_K)\n    per = tl.cdiv(steps, SPLIT_K)\n    lo = ks * per"
             "\n    hi = tl.minimum(lo + per, steps)") if split else ""
    k_at = "(lo * BLOCK_K + rk{})" if split else "rk{}"
    if split:
        bias = [b + " * (ks == 0).to(tl.float32)" for b in bias]
        store = "tl.atomic_add(C + bat * M * N + rm[:, None] * N + rn[None, :], acc, mask=cmask)"
        loads, lines = [], []
    else:
        store = f"tl.store(C + bat * M * N + rm[:, None] * N + rn[None, :], {res}, mask=cmask)"
    return f'''@triton.jit
def {name}({", ".join(args)}, {", ".join(INT_ARGS)},
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
        EVEN_K: tl.constexpr, PREC: tl.constexpr{", SPLIT_K: tl.constexpr" if split else ""}):
    """{group.describe()}{f", K in {p.split_k} slices" if split else ""}"""
    pid = tl.program_id(0)
    bat = tl.program_id(1){chr(10) + "    ks = tl.program_id(2)" if split else ""}
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * num_n
    first = (pid // width) * GROUP_M
    gsz = tl.minimum(num_m - first, GROUP_M)
    pm = first + (pid % width) % gsz
    pn = (pid % width) // gsz
    rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pn * BLOCK_N + tl.arange(0, BLOCK_N){steps}
    rk = tl.arange(0, BLOCK_K)
    am = {_hinted("rm % M", "BLOCK_M", spec.gemm.m % p.tile_m == 0)}
    bn = {_hinted("rn % N", "BLOCK_N", spec.gemm.n % p.tile_n == 0)}
    a_ptrs = A + bat * s_ab + am[:, None] * s_am + {k_at.format("[None, :]")} * s_ak
    b_ptrs = B + bat * s_bb + {k_at.format("[:, None]")} * s_bk + bn[None, :] * s_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in {"range(lo, hi)" if split else "range(0, tl.cdiv(K, BLOCK_K))"}:
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k0 * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < K - k0 * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PREC)
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk
    cmask = (rm[:, None] < M) & (rn[None, :] < N)
{chr(10).join(bias + loads)}
{chr(10).join("    " + ln for ln in lines)}
    {store}
'''


K_MAJOR_MIN_K = 256
"""From this depth on, the launcher hands the kernel both operands K-contiguous, copying B (K, N) into (N, K)
memory when it is stored row-major and no larger than A (a weight, not an activation as a 1x1 convolution's):
Hopper's tensor-core instruction reads 32-bit operands K-major only. On the H100 the same tf32x3 kernel ran
KernelBench L1 1 (B row-major, 4096^3) at 0.69x eager and L1 17 (B.T, K-contiguous, 2048x8192x4096) at 1.56x."""


def launcher_source(fz: Fused, k: int, name: str, p: KernelParams) -> str:
    """Python launcher of an `mm` group: operand strides read at run time, epilogue leaves contiguous."""
    g = fz.group
    spec: MMSpec = g.spec  # type: ignore[assignment]
    s = spec.gemm
    n_epi = len(g.leaves) - 1
    ops = [f"a{i}" for i in range(spec.operands)]
    epi = [f"e{i}" for i in range(n_epi)]
    epi_specs = [leaf for i, leaf in enumerate(g.leaves) if i != spec.mm_leaf]
    lines = [f"def _kv_launch_{k}({', '.join(ops + epi)}):", f'    """{g.describe()}"""', "    dev = a0.device"]
    if s.k >= K_MAJOR_MIN_K:  # both operands K-contiguous (no copy when they are): see K_MAJOR_MIN_K
        lines.append("    a0 = a0.contiguous()")
        if spec.b_layout == "kn" and (s.batch if s.b_batched else 1) * s.n <= (s.batch if s.a_batched else 1) * s.m:
            lines.append("    a1 = a1.mT.contiguous().mT")
    if s.a_batched:
        lines.append("    sa = (a0.stride(0), a0.stride(1), a0.stride(2))")
    else:
        lines += [f"    a0 = a0.reshape({s.m}, {s.k})", "    sa = (0, a0.stride(0), a0.stride(1))"]
    if spec.b_layout == "nk":
        lines.append("    sb = (0, a1.stride(1), a1.stride(0))")
    elif s.b_batched:  # (a 1x1 convolution's input: its positions flattened)
        lines += [f"    a1 = a1.reshape({s.batch}, {s.k}, {s.n})",
                  "    sb = (a1.stride(0), a1.stride(1), a1.stride(2))"]
    else:
        lines.append("    sb = (0, a1.stride(0), a1.stride(1))")
    if spec.bias:
        lines.append("    a2 = a2.contiguous()")
    tiles = f"{-(-s.m // p.tile_m) * -(-s.n // p.tile_n)}"
    args = [*ops[:2], "out", *ops[2:], *epi, str(s.m), str(s.n), str(s.k), "*sa", "*sb"]
    split = p.split_k > 1
    grid = f"({tiles}, {s.batch}, {p.split_k})" if split else f"({tiles}, {s.batch})"
    lines += launch_tail(name, grid, args, g, epi, epi_specs, constants(g, p), zeroed=split)
    return "\n".join(lines) + "\n"


def product(group: Group, operands: list[torch.Tensor]) -> torch.Tensor:
    """The product an `mm` group computes, with torch (the CPU twin of the kernel's main loop)."""
    spec: MMSpec = group.spec  # type: ignore[assignment]
    s = spec.gemm
    a = operands[0].reshape(s.batch if s.a_batched else 1, s.m, s.k)
    b = operands[1].t() if spec.b_layout == "nk" else operands[1]
    b = b.reshape(s.batch if s.b_batched else 1, s.k, s.n)
    c = torch.matmul(a, b)
    if spec.bias:
        c = c + operands[2]
    return c.reshape(group.shape)


def compile_for(kernel: object, group: Group, p: KernelParams, arch: int = 90) -> dict[str, str]:
    """Compile a generated kernel (a JITFunction) for `arch` without a GPU; the stages' text by name
    (ttir, ttgir, llir, ptx, cubin). Raises what Triton raises on a kernel it cannot compile."""
    consts, opts = constants(group, p)
    sig = {a: "*fp32" for a in pointer_args(group)} | {a: "i32" for a in INT_ARGS} | dict.fromkeys(consts, "constexpr")
    return compile_kernel(kernel, sig, consts, opts, arch)
