"""Direct kernels: a whole library op written as one generated kernel, for modules with nothing to fuse.

A module that is only a convolution, a pooling, a scan or an argmax has no element-wise chain to
fuse; the offline proposer then writes the op itself (one thread per output element, grid-stride,
fp32 accumulation, shapes baked in). Each kind registers how to recognise its fx node, its CUDA
text, the blocks its grid needs, and a torch twin that computes the same thing from the kernel's
spec (what `interpret.py` runs on the CPU). The kinds are listed in kinds.py. Element-wise chains after such ops, when there are any,
still become epilogues of the library call: direct kernels are used only when nothing else fuses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from kevolve.kernel_params import KernelParams
from kevolve.offline.graph.canon import ParamRef
from kevolve.offline.graph.ir import Group, Leaf, LeafSpec
from kevolve.offline.graph.partition import Fused

CTYPE = {torch.float32: "float", torch.int64: "long long", torch.bool: "bool", torch.int32: "int"}


@dataclass(frozen=True)
class DirectKind:
    """How one kind of direct kernel is recognised, written and checked."""

    find: Callable[[torch.fx.Node, torch.fx.GraphModule], Fused | None]
    """the group for this fx node, or None when the node is not of this kind (or not supported)"""
    kernel: Callable[[str, Group, KernelParams], str]
    """CUDA text of the kernel named `name`"""
    blocks: Callable[[Group, KernelParams], int]
    """blocks the grid needs to give every output its thread (before the waves cap)"""
    twin: Callable[[Group, list[torch.Tensor]], torch.Tensor]
    """the same computation with torch, from the group's spec (CPU checks)"""
    launcher: Callable[[Fused, int, str, KernelParams], str] | None = None
    """the Python launcher's text where the one-launch default (`kinds.direct_launcher`) does not fit"""


def make_group(kind: str, spec: Any, nodes: list[torch.fx.Node], refs: list[Any], out_shape: tuple[int, ...],
               out_dtype: str = "float32", extra: list[torch.fx.Node] | None = None) -> Fused:
    """A one-kernel group whose leaves are `refs` (fx nodes or ParamRefs) read whole."""
    leaves = [LeafSpec(r.name if isinstance(r, torch.fx.Node) else f"self.{r.path}", ()) for r in refs]
    g = Group(shape=out_shape, reduce_dims=(), leaves=leaves, reductions=[], out=Leaf(0), out_scope="elem",
              out_shape=out_shape, nodes=[n.name for n in nodes], kind=kind, spec=spec, out_dtype=out_dtype)
    return Fused(group=g, nodes=nodes, extra=extra or [], leaf_refs=refs)


def param(gm: torch.fx.GraphModule, node: torch.fx.Node, name: str) -> ParamRef | None:
    """The module parameter `name` of the module called by `node` (None when absent)."""
    t = getattr(gm.get_submodule(str(node.target)), name, None)
    return None if t is None else ParamRef(f"{node.target}.{name}", tuple(t.shape))


def signature(name: str, group: Group, p: KernelParams, dtypes: list[str] | None = None) -> str:
    """`extern "C"` header: one const pointer per leaf (fp32 unless `dtypes` says otherwise), then out."""
    ts = dtypes or ["float"] * len(group.leaves)
    args = ", ".join(f"const {t}* __restrict__ in{i}" for i, t in enumerate(ts))
    out_t = {"float32": "float", "int64": "long long"}[group.out_dtype]
    return (f'extern "C" __global__ void __launch_bounds__({p.block}) {name}({args}, '
            f"{out_t}* __restrict__ out)")


def index_type(n: int) -> str:
    return "unsigned int" if n < 2**31 else "unsigned long long"


def unravel(var: str, sizes: tuple[int, ...], names: list[str], idx: str) -> list[str]:
    """C lines splitting flat index `var` (row-major over `sizes`) into `names` (outermost first)."""
    lines = [f"{idx} r_ = {var};"]
    for i in range(len(sizes) - 1, 0, -1):
        lines.append(f"const int {names[i]} = (int)(r_ % {sizes[i]}u); r_ /= {sizes[i]}u;")
    lines.append(f"const {idx} {names[0]} = r_;")
    return lines


def grid_stride(group: Group, p: KernelParams, body: list[str], idx: str, count: int | None = None) -> str:
    """The usual outer loop: each thread takes work items i, i + grid size, … (`count` of them, one
    per output element unless given)."""
    inner = "\n    ".join(body)
    n = group.numel if count is None else count
    return (f"  for ({idx} i = ({idx})blockIdx.x * {p.block}u + threadIdx.x; i < {n}u; "
            f"i += ({idx})gridDim.x * {p.block}u) {{\n    {inner}\n  }}")


def per_output_blocks(group: Group, p: KernelParams) -> int:
    """One thread per output element."""
    return -(-group.numel // p.block)


def window_patches(x: torch.Tensor, in_size: tuple[int, ...], out_size: tuple[int, ...], kernel: tuple[int, ...],
                   stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...],
                   transposed: bool = False, fill: float = 0.0) -> torch.Tensor:
    """x [N, C, I...] -> [N, C, O..., K...]: the input element each (output, window offset) reads, by the
    generated kernels' own index formulas (`fill` where they skip), so a wrong formula shows up on the CPU."""
    for d in range(len(kernel)):
        o = torch.arange(out_size[d])[:, None]
        k = torch.arange(kernel[d])[None, :]
        if transposed:
            t = o + padding[d] - k * dilation[d]
            i = torch.div(t, stride[d], rounding_mode="floor")
            ok = (t >= 0) & (t % stride[d] == 0) & (i < in_size[d])
        else:
            i = o * stride[d] - padding[d] + k * dilation[d]
            ok = (i >= 0) & (i < in_size[d])
        axis = 2 + d  # earlier spatial dims became (O, …) with their K moved to the end
        picked = x.index_select(axis, i.clamp(0, in_size[d] - 1).reshape(-1))
        shape = [*picked.shape[:axis], out_size[d], kernel[d], *picked.shape[axis + 1:]]
        mask = ok.reshape([1] * axis + [out_size[d], kernel[d]] + [1] * (picked.dim() - axis - 1))
        picked = picked.reshape(shape)
        x = torch.where(mask, picked, torch.full((), fill, dtype=picked.dtype)).movedim(axis + 1, -1)
    return x
