"""Every Triton kernel of a problem's Triton plan, run on the CPU against float64, under legal variants.

A sweep for wrong generated code (KernelBench L2 59's product lost its epilogue in K slices and was
judged incorrect on the H100): the plan's defaults and the variants the search can reach (each precision,
K slices, small and large tiles, the convolutions' layouts, random mutations), each made legal as the search
makes them, rendered, executed, and its launchers run in place of the IR twins (`interpret.run_plan`) on
one draw of the module's inputs. Each output is compared with the module run in float64 the way the judge
compares (`sandbox/judge/correctness.py`): relative max error within factor x eager fp32's own error + the
float32 floor. The caller must have set TRITON_INTERPRET=1 before triton was first imported (a process of
its own: `scripts/offline_interpret_sweep.py`, `tests/triton_interpret_check.py`).
"""

from __future__ import annotations

import copy
import random
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kevolve.kernel_params import KernelParams
from kevolve.offline.space import describe_all, mutate

if TYPE_CHECKING:
    from kevolve.offline.generate import Plan

TRITON_KINDS = ("mm", "tconv")
_MM_CHANGES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("ieee", {"precision": "ieee"}),
    ("split4", {"split_k": 4}),
    ("split64k16", {"split_k": 64, "tile_k": 16}),  # as many slices as legal: shrunk Ks are short (L2 55, 56, 66:
    # K = 256 at shrunk sizes is 8 steps of 32, too few for two slices; 16 steps of 16 allow two)
    ("tiles32x32x16w4", {"tile_m": 32, "tile_n": 32, "tile_k": 16, "warps": 4}),
    ("tiles64x128x64s2", {"tile_m": 64, "tile_n": 128, "tile_k": 64, "stages": 2}),
)
_CONV_CHANGES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("conv_nchw_tf32x3", {"layout": "nchw", "precision": "tf32x3"}),
    ("conv_nhwc", {"layout": "nhwc"}),
    ("conv_library", {"layout": "library"}),
)


@dataclass(frozen=True)
class VariantResult:
    """One legal parameter choice of a plan, run under the interpreter."""

    name: str
    """'default', a named change ('ieee', 'split4', …) or 'mutation<i>'"""
    params: str
    """the settings of every group (`space.describe_all`)"""
    err_inf: float
    """max |candidate - truth| / max |truth| (inf when it did not run or has the wrong shape)"""
    err_2: float
    """||candidate - truth|| / ||truth||"""
    allowed_inf: float
    """the judge's allowance for err_inf: factor x eager's + the float32 floor"""
    allowed_2: float
    abs_err: float
    """max |candidate - truth|"""
    group_err: float = 0.0
    """the worst Triton launch's relative max error against its group's float64 twin on its own arguments"""
    group_allowed: float = 1.0
    """that launch's allowance: factor x the float32 twin's error + the floor"""
    error: str = ""
    """why the variant did not run (an exception of the generator or the kernel), else ''"""

    @property
    def ok(self) -> bool:
        return (not self.error and self.err_inf <= self.allowed_inf and self.err_2 <= self.allowed_2
                and self.group_err <= self.group_allowed)


@dataclass(frozen=True)
class ProblemSweep:
    """A problem's sweep: its Triton groups and every variant's result."""

    name: str
    groups: tuple[str, ...]
    eager_inf: float
    """eager fp32's own relative max error against float64 (the judge's yardstick)"""
    variants: tuple[VariantResult, ...]
    seconds: float

    @property
    def wrong(self) -> tuple[VariantResult, ...]:
        return tuple(v for v in self.variants if not v.ok)


def variants(plan: Plan, mutations: int = 3, seed: int = 0) -> list[tuple[str, list[KernelParams]]]:
    """(name, parameters) of the defaults, each named change on the Triton groups it applies to, and
    `mutations` random double mutations of the defaults; each made legal, duplicates dropped (a change that
    legalises away, K slices of a product with an epilogue, is the defaults again)."""
    base = plan.defaults()
    kinds = [f.group.kind for f in plan.fused]
    named: list[tuple[str, list[KernelParams]]] = [("default", base)]
    for kind, changes in (("mm", _MM_CHANGES), ("tconv", _CONV_CHANGES)):
        if kind in kinds:
            named += [(n, [replace(p, **c) if k == kind else p for p, k in zip(base, kinds, strict=True)])
                      for n, c in changes]
    for i in range(mutations):
        rng = random.Random(seed * 1000 + i)
        named.append((f"mutation{i}", [mutate(mutate(p, f.group, rng), f.group, rng) if f.group.kind in TRITON_KINDS
                                       else p for p, f in zip(base, plan.fused, strict=True)]))
    out, seen = [], set()
    for name, params in named:
        legal = tuple(plan.legalize(params))
        if legal not in seen:
            seen.add(legal)
            out.append((name, list(legal)))
    return out


def _truth(model: Any, inputs: list[Any]) -> Any:
    """The module's output in float64 (a copy of the module; the inputs cast)."""
    import torch

    m64 = copy.deepcopy(model).double()
    with torch.no_grad():
        return m64(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs])


def _run(plan: Plan, params: list[KernelParams], model: Any, inputs: list[Any]) -> tuple[Any, list[_Call]]:
    """The candidate's output (its source executed, its Triton launchers in place of their groups' twins) and
    every Triton launch it made."""
    import torch

    from kevolve.offline.graph.interpret import run_plan

    ns: dict[str, Any] = {"__name__": "kevolve_sweep_candidate"}
    exec(compile(plan.source(params), plan.problem.name, "exec"), ns)  # noqa: S102 — a generated source
    calls: list[_Call] = []

    def recorded(k: int) -> Any:
        def launch(*args: Any) -> Any:
            out = ns[f"_kv_launch_{k}"](*args)
            calls.append(_Call(k, args, out))
            return out
        return launch

    kernels = {k: recorded(k) for k, f in enumerate(plan.fused) if f.group.kind in TRITON_KINDS}
    with torch.no_grad():
        return run_plan(plan, model, inputs, kernels), calls


@dataclass(frozen=True)
class _Call:
    """One launch of a Triton group: its arguments (operands, epilogue leaves) and its output."""

    group: int
    args: tuple[Any, ...]
    out: Any


def _group_error(plan: Plan, calls: list[_Call], factor: float) -> tuple[float, float]:
    """(worst relative max error, its allowance) over the launches: each output against its group's twin on
    the same arguments in float64, allowed factor x the float32 twin's error + the floor. The module's
    output can hide a wrong product (a norm over groups of one channel is all zeros at shrunk sizes)."""
    import torch

    from kevolve.offline.graph.interpret import run_group
    from kevolve.sandbox.judge.correctness import FLOORS, rel_errors

    worst = (0.0, FLOORS[torch.float32])
    for c in calls:
        group = plan.fused[c.group].group
        up = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in c.args]
        with torch.no_grad():
            truth, twin = run_group(group, up), run_group(group, list(c.args))
        finite = torch.isfinite(truth)
        if tuple(c.out.shape) != tuple(truth.shape) or not torch.equal(torch.isfinite(c.out), finite):
            return float("inf"), worst[1]
        err = rel_errors(c.out.double(), truth, finite)[0]
        allowed = factor * rel_errors(twin.double(), truth, finite)[0] + FLOORS[torch.float32]
        if err / allowed > worst[0] / worst[1]:
            worst = (err, allowed)
    return worst


def _result(name: str, desc: str, got: Any, truth: Any, eager: tuple[float, float], factor: float,
            group: tuple[float, float]) -> VariantResult:
    from kevolve.sandbox.judge.correctness import FLOORS, rel_errors

    import torch

    floor = FLOORS[torch.float32]
    allowed = (factor * eager[0] + floor, factor * eager[1] + floor)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(truth.shape):
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        return VariantResult(name, desc, float("inf"), float("inf"), *allowed, float("inf"),
                             error=f"output {shape}, expected {tuple(truth.shape)}")
    finite = torch.isfinite(truth)
    if not torch.equal(torch.isfinite(got), finite):
        return VariantResult(name, desc, float("inf"), float("inf"), *allowed, float("inf"),
                             error="non-finite values where float64 has finite ones (or the reverse)")
    e_inf, e_2 = rel_errors(got.double(), truth, finite)
    worst = float((got.double() - truth).abs()[finite].max()) if finite.any() else 0.0
    return VariantResult(name, desc, e_inf, e_2, *allowed, worst, *group)


def sweep_plan(plan: Plan, mutations: int = 3, seed: int = 0, factor: float | None = None) -> ProblemSweep:
    """Every variant of a Triton plan on one draw of the module's inputs, against float64 (`factor`: the
    judge's tolerance factor, its configured default when None)."""
    from kevolve.offline.coverage import reference
    from kevolve.sandbox.config import SandboxConfig
    from kevolve.sandbox.judge.correctness import rel_errors

    import torch

    t0 = time.monotonic()
    factor = SandboxConfig.model_fields["tolerance_factor"].default if factor is None else factor
    model, inputs = reference(plan.problem)
    truth = _truth(model, inputs)
    if not isinstance(truth, torch.Tensor):
        raise TypeError(f"the module returns {type(truth).__name__}, not one tensor")
    with torch.no_grad():
        eager = rel_errors(model(*inputs).double(), truth, torch.isfinite(truth))
    results = []
    for name, params in variants(plan, mutations, seed):
        desc = describe_all(params, [f.group for f in plan.fused])
        try:
            got, calls = _run(plan, params, model, inputs)
            group = _group_error(plan, calls, factor)
        except Exception as e:  # noqa: BLE001 — a generator or kernel failure is this variant's result
            first = (str(e).splitlines() or [""])[0]
            results.append(VariantResult(name, desc, *(float("inf"),) * 5, error=f"{type(e).__name__}: {first}"[:300]))
            continue
        results.append(_result(name, desc, got, truth, eager, factor, group))
    groups = tuple(f.group.describe() for f in plan.fused if f.group.kind in TRITON_KINDS)
    return ProblemSweep(plan.problem.name, groups, eager[0], tuple(results), time.monotonic() - t0)


def triton_plan(problem: Any, kinds: tuple[str, ...] = ("mm",)) -> Plan | None:
    """The problem's Triton plan if it has a group of one of `kinds`, else None (raises as `plans` does)."""
    from kevolve.offline.generate import plans

    tri = [p for p in plans(problem) if p.technique == "triton_mm"]
    if not tri or not any(f.group.kind in kinds for f in tri[0].fused):
        return None
    return tri[0]
