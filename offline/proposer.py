"""The offline generator as a proposer: which kernel parameters the next candidate gets, from its parents' choices.

`OfflineGenerator.propose` answers one job with a source and the typed choice it was made with (`OfflineChoice`,
carried on the candidate's record): a translate job gets each plan variant's defaults in turn (CUDA beside library
calls, then Triton products with fused epilogues where the problem has products), then fresh parameter draws; a
mutate or crossover job changes or crosses its offline parents' parameters; a repair job makes a failed parent's
Triton products one precision more exact. The loop drives it through its proposer seam (agent/proposer.py);
nothing here knows the loop.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Sequence

from kevolve.kernel_params import KernelParams
from kevolve.offline.generate import Generated, Plan, plans
from kevolve.offline.space import crossover, more_precise, mutate
from kevolve.offline.graph.trace import TraceError
from kevolve.records import Candidate, OfflineChoice, Origin, Problem

log = logging.getLogger(__name__)


class OfflineGenerator:
    """Proposes generated kernels for one problem; no network, no tokens, no cost."""

    name = "offline"

    def __init__(self, problem: Problem, seed: int = 0) -> None:
        self.problem = problem
        self._plans: list[Plan] | None = None
        self._error: str | None = None
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._translations = 0

    def plans(self) -> list[Plan]:
        """Every plan variant of the traced problem (traced once), the CUDA one first; raises TraceError with the
        trace verdict (every time it is asked)."""
        with self._lock:
            if self._plans is None and self._error is None:
                try:
                    self._plans = plans(self.problem)
                except TraceError as e:
                    self._error = str(e)
            if self._plans is None:
                raise TraceError(str(self._error))
            return self._plans

    def plan(self) -> Plan:
        """The CUDA plan (the first variant)."""
        return self.plans()[0]

    def _parents(self, choices: Sequence[OfflineChoice], plan: Plan) -> list[list[KernelParams]]:
        """The parameters of the parents made by `plan`'s variant (as many groups as it has)."""
        return [list(c.groups) for c in choices if c.technique == plan.technique and len(c.groups) == len(plan.fused)]

    def choose(self, parents: Sequence[OfflineChoice] = ()) -> tuple[Plan, list[KernelParams]]:
        """The next candidate: the parents' variant crossed (two offline parents) or mutated (one), else a
        translation: each variant's defaults in turn, then fresh draws around them."""
        variants = self.plans()
        p = next((v for c in parents for v in variants if v.technique == c.technique), variants[0])
        got = self._parents(parents, p)
        with self._lock:
            rng = self._rng
            if len(got) >= 2:
                return p, [crossover(a, b, f.group, rng) for a, b, f in zip(got[0], got[1], p.fused, strict=True)]
            if got:
                k = rng.randrange(len(p.fused))
                return p, [mutate(x, f.group, rng) if i == k else x
                           for i, (x, f) in enumerate(zip(got[0], p.fused, strict=True))]
            self._translations += 1
            n = self._translations
        if n <= len(variants):
            v = variants[n - 1]
            return v, v.legalize(v.defaults())
        v = variants[n % len(variants)]
        with self._lock:
            return v, [mutate(x, f.group, self._rng) for x, f in zip(v.defaults(), v.fused, strict=True)]

    def repair(self, parents: Sequence[OfflineChoice]) -> tuple[Plan, list[KernelParams]] | None:
        """A failed parent with Triton products, again with them one precision more exact (tf32 -> tf32x3 ->
        ieee fp32: the repair that most often fixes an `incorrect` product); None when there is no such parent."""
        for c in parents:
            v = next((v for v in self.plans() if v.technique == c.technique), None)
            got = None if v is None else self._parents([c], v)
            if v is None or not got:
                continue
            fixed = [more_precise(p, f.group) for p, f in zip(got[0], v.fused, strict=True)]
            if fixed != got[0]:
                return v, v.legalize(fixed)
        return None

    def propose(self, operator: Origin, parents: Sequence[Candidate]) -> Generated:
        """The candidate for a job of `operator` whose parents are `parents` (only the offline ones of this
        problem count); raises TraceError when the problem gives nothing to generate."""
        choices = [c.offline for c in parents if c.offline is not None and c.problem_id == self.problem.id]
        fixed = self.repair(choices) if operator is Origin.REPAIR else None
        plan_, params = fixed if fixed is not None else self.choose(choices)
        return plan_.generate(params)


__all__ = ["OfflineGenerator"]
