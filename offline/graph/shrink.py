"""Smaller shapes for a problem, so its IR can be checked against the module on the CPU in seconds.

KernelBench problems set their sizes as top-level integers (`batch_size = 4096`, `dim = 393216`,
`input_shape = (32768,)`) that `get_inputs()` / `get_init_inputs()` read when called. `shrink`
halves (quarters, while far off) the largest of them, one at a time, until the inputs, parameters and the convolutions' and
products' work fit a budget; a halving that breaks the module (a group count no longer divides the
channels, a kernel larger than its input) is undone and that size is left alone. Only the sizes
change: the module, its ops and their order are the problem's own.
"""

from __future__ import annotations

import ast
import logging
import math
import types
from dataclasses import dataclass
from typing import Any
from kevolve.contract import parse_python

MIN_SIZE = 8
"""sizes are never halved below this (kernel sizes, strides, dims and group counts are smaller and stay)"""


@dataclass(frozen=True)
class Budget:
    """How small is small enough."""

    elements: int = 1 << 20
    """input and parameter elements, together"""
    flops: float = 2e8
    """convolution and matrix-product FLOPs of one forward (FlopCounterMode's count)"""


@dataclass(frozen=True)
class _Size:
    """One shrinkable integer: statement `stmt` of the module, element `index` when it is a tuple."""

    stmt: int
    name: str
    index: int | None


def _sizes(tree: ast.Module, ns: dict[str, Any]) -> dict[_Size, int]:
    out: dict[_Size, int] = {}
    for i, st in enumerate(tree.body):
        if not isinstance(st, ast.Assign) or not all(isinstance(t, ast.Name) for t in st.targets):
            continue
        name = st.targets[0].id  # type: ignore[attr-defined]
        v = ns.get(name)
        if any(isinstance(n, ast.Name) for n in ast.walk(st.value)):
            continue  # derived from other sizes (`shape = (channels, height)`): follows them
        if isinstance(v, int) and not isinstance(v, bool) and v >= 2 * MIN_SIZE:
            out[_Size(i, name, None)] = v
        elif isinstance(v, tuple) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            out.update({_Size(i, name, j): x for j, x in enumerate(v) if x >= 2 * MIN_SIZE})
    return out


def with_sizes(source: str, sizes: dict[_Size, int]) -> str:
    """`source` with each chosen size's assignment replaced by its new value."""
    tree = parse_python(source)
    lines = source.splitlines()
    by_stmt: dict[int, dict[_Size, int]] = {}
    for s, v in sizes.items():
        by_stmt.setdefault(s.stmt, {})[s] = v
    for i in sorted(by_stmt, reverse=True):
        st = tree.body[i]
        names = [t.id for t in st.targets]  # type: ignore[attr-defined]
        vals = by_stmt[i]
        if any(s.index is not None for s in vals):
            ns: dict[str, Any] = {}
            exec(compile(ast.Module([st], []), "<size>", "exec"), _fresh(source, i), ns)  # noqa: S102
            cur = list(ns.get(names[0], ()))
            for s, v in vals.items():
                cur[s.index] = v  # type: ignore[index]
            value = repr(tuple(cur))
        else:
            value = repr(next(iter(vals.values())))
        first, last = lines[st.lineno - 1], lines[st.end_lineno - 1]  # type: ignore[index, operator]
        new = first[:st.col_offset] + " = ".join(names) + f" = {value}" + last[st.end_col_offset:]
        lines[st.lineno - 1:st.end_lineno] = [new]  # `a = 1; b = 2` on one line keeps its neighbour
    return "\n".join(lines) + "\n"


def _fresh(source: str, upto: int) -> dict[str, Any]:
    """The module namespace after its first `upto` top-level statements (to re-evaluate one)."""
    tree = parse_python(source)
    ns: dict[str, Any] = {}
    exec(compile(ast.Module(tree.body[:upto], []), "<size>", "exec"), ns)  # noqa: S102
    return ns


def cost(source: str) -> tuple[int, float]:
    """(input + parameter elements, FLOPs) of one forward, measured on fake tensors (nothing allocated)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)  # failed trials are expected

    mod = types.ModuleType("kevolve_shrink")
    exec(compile(source, "<problem>", "exec"), mod.__dict__)  # noqa: S102 — the user's own problem
    ns = mod.__dict__
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            model = ns["Model"](*ns["get_init_inputs"]()).eval()
    except RuntimeError:
        # a constructor that converts its parameters (`self.to(torch.bfloat16)`) cannot swap fake parameters:
        # the meta device allocates nothing either
        mode: Any = torch.device("meta")
    else:
        mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        model = ns["Model"](*ns["get_init_inputs"]()).eval()
        inputs = list(ns["get_inputs"]())
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            model(*inputs)
    elems = sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))
    elems += sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
    return elems, float(counter.get_total_flops())


def shrink(source: str, budget: Budget = Budget(), max_steps: int = 80) -> str:
    """A version of the problem source with sizes small enough for `budget` (the source itself if it is)."""
    tree = parse_python(source)
    ns: dict[str, Any] = {}
    exec(compile(source, "<problem>", "exec"), ns)  # noqa: S102
    sizes = _sizes(tree, ns)
    frozen: set[_Size] = set()
    elems, flops = cost(source)
    for _ in range(max_steps):
        if elems <= budget.elements and flops <= budget.flops:
            break
        free = [s for s, v in sizes.items() if s not in frozen and v >= 2 * MIN_SIZE]
        if not free:
            break
        pick = max(free, key=lambda s: (sizes[s], -s.stmt))
        over = max(elems / budget.elements, flops / budget.flops)
        trial = dict(sizes)
        trial[pick] = max(MIN_SIZE, math.ceil(sizes[pick] / (4 if over >= 16 else 2)))  # quarter while far off
        try:
            e2, f2 = cost(with_sizes(source, trial))
        except Exception:  # noqa: BLE001 — this size cannot shrink (constraint of the module); keep it
            frozen.add(pick)
            continue
        sizes, elems, flops = trial, e2, f2
    return with_sizes(source, sizes)


def ragged(source: str) -> str:
    """`source` with each shrinkable size one less where the module still runs with it (a group count must
    still divide its channels): KernelBench's sizes, and the halvings of `shrink`, are mostly powers of two,
    which every tile divides; a kernel's masks and partial tiles run only on sizes that are not."""
    tree = parse_python(source)
    ns: dict[str, Any] = {}
    exec(compile(source, "<problem>", "exec"), ns)  # noqa: S102
    sizes = _sizes(tree, ns)
    for s in sorted(sizes, key=lambda s: (s.stmt, s.index or 0)):
        trial = dict(sizes) | {s: sizes[s] - 1}
        try:
            cost(with_sizes(source, trial))
        except Exception:  # noqa: BLE001 — this size cannot change (constraint of the module); keep it
            continue
        sizes = trial
    return with_sizes(source, sizes)
