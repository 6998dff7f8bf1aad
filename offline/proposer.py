"""The offline proposer behind the agent's Proposer seam (agent/proposer.py), so the same LangGraph loop drives it.

`OfflineProposer` answers each job from its parents' records: a translate job gets a generated
candidate (each plan variant's defaults first — CUDA beside library calls, then Triton products with
fused epilogues where the problem has products — then fresh parameter draws); a mutate, crossover or
repair job's parents are offline candidates whose `# kevolve-offline:` line gives their variant and
parameters, which are mutated or crossed. `SeededProposer` puts offline candidates into an LLM run's first generation.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kevolve.agent.llm.base import Completion, Message, NonRetryableLLMError
from kevolve.offline.generate import Plan, plans
from kevolve.offline.space import KernelParams, crossover, decode, decode_technique, more_precise, mutate
from kevolve.offline.trace import TraceError
from kevolve.agent.state import Job, Trial
from kevolve.records import Origin, Problem

if TYPE_CHECKING:
    from kevolve.agent.proposer import Proposer

log = logging.getLogger(__name__)


def parent_params(sources: Sequence[str], problem_id: str, n_groups: int, technique: str = "cuda") -> list[list[KernelParams]]:
    """Parameters of the parents that are offline candidates of this problem and technique (their
    `# kevolve-offline:` line)."""
    out = []
    for src in sources:
        got = decode(src, problem_id)
        if got is not None and len(got) == n_groups and decode_technique(src) == technique:
            out.append(got)
    return out


class OfflineProposer:
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
        """Every plan variant of the traced problem (traced once), the CUDA one first; raises
        NonRetryableLLMError with the trace verdict."""
        with self._lock:
            if self._plans is None and self._error is None:
                try:
                    self._plans = plans(self.problem)
                except TraceError as e:
                    self._error = str(e)
            if self._plans is None:
                raise NonRetryableLLMError(f"offline proposer: {self._error}")
            return self._plans

    def plan(self) -> Plan:
        """The CUDA plan (the first variant)."""
        return self.plans()[0]

    def choose(self, parent_sources: Sequence[str]) -> tuple[Plan, list[KernelParams]]:
        """The next candidate: the parents' variant crossed (two offline parents) or mutated (one), else a
        translation: each variant's defaults in turn, then fresh draws around them."""
        variants = self.plans()
        techniques = [decode_technique(s) for s in parent_sources]
        p = next((v for t in techniques for v in variants if v.technique == t), variants[0])
        parents = parent_params(parent_sources, self.problem.id, len(p.fused), p.technique)
        with self._lock:
            rng = self._rng
            if len(parents) >= 2:
                return p, [crossover(a, b, f.group, rng) for a, b, f in zip(parents[0], parents[1], p.fused, strict=True)]
            if parents:
                k = rng.randrange(len(p.fused))
                return p, [mutate(x, f.group, rng) if i == k else x
                           for i, (x, f) in enumerate(zip(parents[0], p.fused, strict=True))]
            self._translations += 1
            n = self._translations
        if n <= len(variants):
            v = variants[n - 1]
            return v, v.legalize(v.defaults())
        v = variants[n % len(variants)]
        with self._lock:
            return v, [mutate(x, f.group, self._rng) for x, f in zip(v.defaults(), v.fused, strict=True)]

    def params_for(self, parent_sources: Sequence[str]) -> list[KernelParams]:
        """The parameters `choose` picks (of whichever variant it picks)."""
        return self.choose(parent_sources)[1]

    def repair(self, parent_sources: Sequence[str]) -> tuple[Plan, list[KernelParams]] | None:
        """A failed parent with Triton products, again with them one precision more exact (tf32 -> tf32x3 ->
        ieee fp32: the repair that most often fixes an `incorrect` product); None when there is no such parent."""
        for src in parent_sources:
            v = next((v for v in self.plans() if v.technique == decode_technique(src)), None)
            got = None if v is None else parent_params([src], self.problem.id, len(v.fused), v.technique)
            if v is None or not got:
                continue
            fixed = [more_precise(p, f.group) for p, f in zip(got[0], v.fused, strict=True)]
            if fixed != got[0]:
                return v, v.legalize(fixed)
        return None

    def propose(self, job: Job, parents: Sequence[Trial], messages: list[Message], sample: str) -> Completion:
        sources = [t.candidate.source for t in parents if t.candidate is not None]
        fixed = self.repair(sources) if job.operator is Origin.REPAIR else None
        plan_, params = fixed if fixed is not None else self.choose(sources)
        return Completion(text=f"```python\n{plan_.source(params)}```\n", model=self.name)


class SeededProposer:
    """A proposer whose run starts with offline candidates: the first `seeds` translate jobs of generation
    0 are answered by the offline proposer, everything else by `base` (mutations of offline parents
    included, so the LLM can improve on them)."""

    def __init__(self, base: Proposer, offline: OfflineProposer, seeds: int = 1) -> None:
        self.base, self.offline, self.seeds = base, offline, seeds
        self.name = base.name
        self._given = 0
        self._lock = threading.Lock()

    def propose(self, job: Job, parents: Sequence[Trial], messages: list[Message], sample: str) -> Completion:
        with self._lock:
            take = job.generation == 0 and job.operator is Origin.TRANSLATE and self._given < self.seeds
            self._given += take
        if take:
            try:
                return self.offline.propose(job, parents, messages, sample)
            except NonRetryableLLMError as e:  # nothing to fuse / untraceable: the LLM translates instead
                log.info("no offline seed: %s", e)
        return self.base.propose(job, parents, messages, sample)


__all__ = ["OfflineProposer", "SeededProposer", "parent_params"]
