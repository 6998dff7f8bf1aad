"""Evaluate a Group with torch on the CPU: checks that the IR computes what the module computes.

The CUDA text of each op has a torch twin (`ops.py`); this runs the same IR with the twins, reading
each leaf through `as_strided` with the IR's strides, so a wrong stride, layout or decomposition
shows up as a numeric mismatch in CPU tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.fx
from kevolve.offline.graph.dtypes import NARROW, STORAGE
from kevolve.offline.graph.ir import Const, Expr, Group, Leaf, Op, Stat
from kevolve.offline.graph.ops import torch_call

if TYPE_CHECKING:
    from kevolve.offline.generate import Plan

_COMBINE = {"sum": torch.sum, "max": torch.amax, "min": torch.amin, "prod": torch.prod}


def _reduce(combine: str, t: torch.Tensor, dims: list[int]) -> torch.Tensor:
    if combine == "prod":
        for d in dims:
            t = torch.prod(t, d, keepdim=True)
        return t
    return _COMBINE[combine](t, dims, keepdim=True)


def run_group(group: Group, leaves: list[torch.Tensor]) -> torch.Tensor:
    """The group's output for these leaf tensors (same order as `group.leaves`)."""
    if group.kind == "gemm":
        s = group.gemm
        a = leaves[0].reshape(s.batch if s.a_batched else 1, s.m, s.k)  # type: ignore[union-attr]
        b = leaves[1].reshape(s.batch if s.b_batched else 1, s.k, s.n)  # type: ignore[union-attr]
        return torch.matmul(a, b).reshape(group.out_shape)
    if group.kind == "mm":
        return _run_mm(group, leaves)
    if group.kind == "tconv":
        return _run_tconv(group, leaves)
    if group.kind != "fused":
        from kevolve.offline.kernels_direct.kinds import registry

        return registry()[group.kind].twin(group, leaves)
    views = [torch.as_strided(torch.as_tensor(t, dtype=_dtype(t)).contiguous().reshape(-1), group.shape, spec.strides)
             for t, spec in zip(leaves, group.leaves, strict=True)]
    stats: list[torch.Tensor] = []
    memo: dict[Expr, torch.Tensor] = {}

    def ev(e: Expr) -> torch.Tensor:
        if e in memo:
            return memo[e]
        if isinstance(e, Leaf):
            v = views[e.index]
        elif isinstance(e, Const):
            v = torch.tensor(e.value, dtype=torch.float32)
        elif isinstance(e, Stat):
            v = stats[e.index]
        else:
            assert isinstance(e, Op)
            v = torch_call(e.name, [ev(a) for a in e.args], e.params)
        memo[e] = v
        return v

    dims = list(group.reduce_dims)
    for red in group.reductions:
        val = ev(red.expr).expand(group.shape)
        stats.append(_reduce(red.combine, val, dims) if dims else val)
    out = ev(group.out)
    if group.out_scope == "elem":
        return _stored(out.expand(group.shape).contiguous().reshape(group.out_shape), group)
    out = out.expand(group.shape)  # a per-row value (leaves broadcast along the row): read it at the row's start
    for d in group.reduce_dims:
        out = out.narrow(d, 0, 1)
    return _stored(out.contiguous().reshape(group.out_shape), group)


def _stored(out: torch.Tensor, group: Group) -> torch.Tensor:
    """The fp32 result as the kernel stores it: rounded to a 16-bit output dtype (to nearest even, as
    the kernel's store), kept as is for fp32 outputs and for a float64 truth (`triton_sweep.py`)."""
    if out.dtype == torch.float32 and group.out_dtype in NARROW:
        return out.to(STORAGE[group.out_dtype])
    return out


def _dtype(t: object) -> torch.dtype:
    """float64 for a float64 leaf (a group's truth, `triton_sweep.py`), float32 for anything else (a bf16 or
    fp16 leaf widens exactly, as the kernel's load)."""
    return torch.float64 if isinstance(t, torch.Tensor) and t.dtype == torch.float64 else torch.float32


def _run_mm(group: Group, args: list[torch.Tensor]) -> torch.Tensor:
    """An `mm` group: the product (its operands first), then the epilogue with the product as its leaf."""
    from dataclasses import replace

    from kevolve.offline.kernels_triton.triton_mm import product

    spec = group.spec
    prod = product(group, args[:spec.operands])
    rest = list(args[spec.operands:])
    leaves = rest[:spec.mm_leaf] + [prod] + rest[spec.mm_leaf:]
    return run_group(replace(group, kind="fused", gemm=None, spec=None), leaves)


def _run_tconv(group: Group, args: list[torch.Tensor]) -> torch.Tensor:
    """A `tconv` group: the convolution (its operands first), then the epilogue with it as its leaf."""
    from dataclasses import replace

    from kevolve.offline.kernels_triton.triton_conv import conv_output

    spec = group.spec
    conv = conv_output(group, args[:spec.operands])
    if spec.conv_leaf < 0:
        return conv.reshape(group.out_shape)
    rest = list(args[spec.operands:])
    leaves = rest[:spec.conv_leaf] + [conv] + rest[spec.conv_leaf:]
    return run_group(replace(group, kind="fused", spec=None), leaves)


def run_plan(plan: Plan, model: torch.nn.Module, inputs: list[torch.Tensor],
             launchers: dict[int, Callable[..., torch.Tensor]] | None = None) -> torch.Tensor:
    """The rewritten forward on the CPU, each group evaluated by `run_group` (what ModelNew computes), or
    by `launchers[k]` where given (a generated launcher, e.g. a Triton kernel under TRITON_INTERPRET=1)."""
    from kevolve.offline.kernels_cuda.emit import rewrite, traced_constants

    graph = rewrite(plan.traced, plan.fused)
    for n in graph.nodes:
        k = getattr(n.target, "kv_group", None) if n.op == "call_function" else None
        if k is not None:
            given = (launchers or {}).get(k)
            n.target = _launcher(plan.fused[k].group, k) if given is None else _named(given, k)
    consts = traced_constants(plan.traced)
    for name, t in consts.items():  # what ModelNew registers as buffers; removed again below
        model.register_buffer(name, t, persistent=False)
    try:
        return torch.fx.GraphModule(model, graph)(*inputs)
    finally:
        for name in consts:
            delattr(model, name)


def _launcher(group: Group, k: int) -> Callable[..., torch.Tensor]:
    return _named(lambda *leaves: run_group(group, list(leaves)), k)


def _named(fn: Callable[..., torch.Tensor], k: int) -> Callable[..., torch.Tensor]:
    """`fn` behind a function of this module (fx writes code that imports call targets by module)."""
    def launch(*leaves: torch.Tensor) -> torch.Tensor:
        return fn(*leaves)

    launch.__name__ = launch.__qualname__ = f"kv_cpu_launch_{k}"
    return launch
