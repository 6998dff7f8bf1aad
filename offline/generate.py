"""From a problem to candidate sources: trace, partition, pick parameters, render.

`plan(problem)` does the expensive part once (tracing and fusion); `source(plan, params)` renders a
candidate for any parameter choice, so the search can make many candidates from one plan.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kevolve.kernel_params import KernelParams
from kevolve.offline.kernels_cuda.emit import render
from kevolve.offline.graph.partition import Fused, partition
from kevolve.offline.space import default_params, legal
from kevolve.offline.graph.trace import Traced, TraceError, trace_problem

from kevolve.records import OfflineChoice, Problem

log = logging.getLogger(__name__)


class NothingToFuse(TraceError):
    """The module has no op the offline proposer generates kernels for (only library calls)."""


@dataclass
class Plan:
    """A traced, partitioned problem: what every offline candidate of it is made from."""

    problem: Problem
    traced: Traced
    fused: list[Fused]
    technique: str = "cuda"
    """how its products are done: 'cuda' (library calls, CUDA kernels for the rest) or 'triton_mm'
    (products with their element-wise epilogue as fused Triton kernels)"""

    def defaults(self) -> list[KernelParams]:
        return [default_params(f.group) for f in self.fused]

    def legalize(self, params: list[KernelParams]) -> list[KernelParams]:
        """Each group's parameters made legal; the whole-forward graph setting is the first group's."""
        from dataclasses import replace

        out = [legal(p, f.group) for p, f in zip(params, self.fused, strict=True)]
        return [replace(p, graph=out[0].graph) for p in out] if out else out

    def source(self, params: list[KernelParams] | None = None) -> str:
        """A candidate source for these parameters (the defaults when None)."""
        ps = self.legalize(params if params is not None else self.defaults())
        return render(self.problem.source, self.traced, self.fused, ps, self.technique)

    def generate(self, params: list[KernelParams] | None = None) -> Generated:
        """`source(params)` with what it was made with, as its Candidate record carries it."""
        ps = self.legalize(params if params is not None else self.defaults())
        return Generated(source=self.source(ps), choice=OfflineChoice(technique=self.technique, groups=tuple(ps)))


@dataclass(frozen=True)
class Generated:
    """One generated candidate: its source and the choice it was made with (for `Candidate.offline`)."""

    source: str
    choice: OfflineChoice


def plan(problem: Problem) -> Plan:
    """Trace and partition; raises TraceError (or NothingToFuse) with a one-line verdict."""
    from kevolve.offline.kernels_direct.kinds import direct_groups, recurrent_groups

    traced = trace_problem(problem)
    fused = _in_graph_order(traced, partition(traced.gm) + recurrent_groups(traced.gm))
    if not fused:
        from kevolve.offline.kernels_direct.gemm import find_gemm

        gemm = find_gemm(traced.gm)
        fused = [gemm] if gemm is not None else []
    if not fused:
        fused = direct_groups(traced.gm)
    if not fused:
        ops = sorted({str(n.target) for n in traced.gm.graph.nodes if n.op.startswith("call")})
        raise NothingToFuse(f"nothing_to_fuse: only library / unsupported ops ({', '.join(ops)[:120]}); "
                            "the offline proposer keeps those in PyTorch and needs at least one op to fuse")
    log.info("%s: %s", problem.name, "; ".join(f.group.describe() for f in fused))
    return Plan(problem=problem, traced=traced, fused=fused)


def _in_graph_order(traced: Traced, fused: list[Fused]) -> list[Fused]:
    """Groups by their sink's place in the graph (`rewrite` replaces them in this order)."""
    order = {n: i for i, n in enumerate(traced.gm.graph.nodes)}
    return sorted(fused, key=lambda f: order[f.sink])


def plans(problem: Problem) -> list[Plan]:
    """Every plan variant of a problem, the CUDA one first: each is another kind of candidate, and the
    evaluator decides which is faster. Raises like `plan` when there is none."""
    from kevolve.offline.kernels_triton.triton_mm import triton_groups

    base = plan(problem)
    out = [base]
    tri = triton_groups(base.traced.gm, base.fused)
    if tri is not None:
        log.info("%s (triton_mm): %s", problem.name, "; ".join(f.group.describe() for f in tri))
        out.append(Plan(problem=problem, traced=base.traced, fused=tri, technique="triton_mm"))
    return out
