"""The proposer seam: who writes a job's candidate. An LLM, the offline generator, or an LLM whose run
starts from offline candidates; `make_proposer` builds the one the config asks for, inside `run_optimize`,
so the CLI, `kevolve.optimize()` and `bench --optimize` all get the same.

A proposer sees the job's prompt and its parents' records and answers with a `Proposal`: an LLM's reply, whose
code the loop extracts, or a generator's source with what it chose (the offline generator reads its parents'
choices from their records, never from the prompt's or the source's text).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from pydantic import Field

from kevolve.agent.config import OptimizeConfig
from kevolve.agent.llm.base import LLM, Completion, Message, NonRetryableLLMError
from kevolve.agent.state import Job, Trial
from kevolve.records import OfflineChoice, Origin, Problem, Record

if TYPE_CHECKING:
    from kevolve.offline.proposer import OfflineGenerator

log = logging.getLogger(__name__)


class Proposal(Record):
    """A proposer's answer to one job."""

    reply: Completion = Field(description="what the job cost, and an LLM's reply (its code still to be extracted)")
    source: str | None = Field(default=None, description=(
        "the candidate's source where the proposer wrote it itself (the offline generator): nothing to extract"))
    offline: OfflineChoice | None = Field(default=None, description="what the offline generator chose, for the "
                                          "candidate's record")
    origin: Origin | None = Field(default=None, description="how the candidate came to be, where not the job's "
                                  "operator (a kernel the archive already held: imported)")
    proposer: str | None = Field(default=None, description="who wrote it, where not the run's proposer")


class Proposer(Protocol):
    """Answers one job; raises NonRetryableLLMError to stop the run, LLMError to skip the job."""

    name: str
    """What the candidates' `proposer` field records (e.g. 'openai:gpt-4o', 'offline')."""

    def propose(self, job: Job, parents: Sequence[Trial], messages: list[Message], sample: str) -> Proposal: ...


class LLMProposer:
    """An LLM answering the rendered prompt (`sample` keys its reply cache)."""

    def __init__(self, llm: LLM) -> None:
        self.llm, self.name = llm, llm.name

    def propose(self, job: Job, parents: Sequence[Trial], messages: list[Message], sample: str) -> Proposal:
        return Proposal(reply=self.llm.complete(messages, sample=sample))


class OfflineProposer:
    """The offline generator (kevolve.offline) behind the seam: no prompt, no tokens, no cost."""

    def __init__(self, generator: OfflineGenerator) -> None:
        self.generator, self.name = generator, generator.name

    def propose(self, job: Job, parents: Sequence[Trial], messages: list[Message], sample: str) -> Proposal:
        from kevolve.offline.graph.trace import TraceError

        try:
            got = self.generator.propose(job.operator, [t.candidate for t in parents if t.candidate is not None])
        except TraceError as e:  # untraceable, or nothing to fuse: no job of this run can do better
            raise NonRetryableLLMError(f"offline proposer: {e}") from None
        return Proposal(reply=Completion(text="", model=self.name), source=got.source, offline=got.choice)


class SeededProposer:
    """A proposer whose run starts with offline candidates: the first `seeds` translate jobs of generation
    0 are answered by the offline proposer, everything else by `base` (mutations of offline parents
    included, so the LLM can improve on them)."""

    def __init__(self, base: Proposer, offline: OfflineProposer, seeds: int = 1) -> None:
        self.base, self.offline, self.seeds = base, offline, seeds
        self.name = base.name
        self._given = 0
        self._lock = threading.Lock()

    def propose(self, job: Job, parents: Sequence[Trial], messages: list[Message], sample: str) -> Proposal:
        with self._lock:
            take = job.generation == 0 and job.operator is Origin.TRANSLATE and self._given < self.seeds
            self._given += take
        if take:
            try:
                return self.offline.propose(job, parents, messages, sample)
            except NonRetryableLLMError as e:  # nothing to fuse / untraceable: the LLM translates instead
                log.info("no offline seed: %s", e)
        return self.base.propose(job, parents, messages, sample)


class ArchiveSeeded:
    """A proposer whose run starts with kernels known to solve this very problem or one like it (the archive's for the
    same problem, archive.known; a sibling part's winner, agent/parts.py): the first translate jobs of generation 0
    are answered with their sources, judged again here like any candidate; everything else by `base`, which can then
    improve on them (their mutations). `by` is what the candidates' `proposer` field records."""

    def __init__(self, base: Proposer, kernels: Sequence[object], by: str = "archive") -> None:
        self.base, self.name, self.by = base, base.name, by
        self._left = [(str(getattr(k, "id", "")), str(getattr(k, "source", ""))) for k in kernels]
        self._lock = threading.Lock()

    def propose(self, job: Job, parents: Sequence[Trial], messages: list[Message], sample: str) -> Proposal:
        with self._lock:
            take = job.generation == 0 and job.operator is Origin.TRANSLATE and bool(self._left)
            got = self._left.pop(0) if take else None
        if got is None:
            return self.base.propose(job, parents, messages, sample)
        log.info("%s: answered by kernel %s (%s)", job.id, got[0], self.by)
        return Proposal(reply=Completion(text="", model=self.by), source=got[1], origin=Origin.IMPORTED,
                        proposer=self.by)


def make_proposer(problem: Problem, config: OptimizeConfig, llm: LLM | None = None) -> Proposer:
    """The run's proposer: offline (`config.offline`); else the LLM (`llm`, or one made from `config.llm`),
    seeded with `config.offline_seeds` offline translations on a CUDA run whose module traces.
    Raises NonRetryableLLMError for an unusable LLM setting."""
    from kevolve.offline.proposer import OfflineGenerator  # torch and the code generator: only when asked for
    from kevolve.offline.graph.trace import TraceError

    seed = config.evolution.seed
    if config.offline:
        return OfflineProposer(OfflineGenerator(problem, seed=seed))
    if llm is None:
        from kevolve.agent.llm import make_llm

        assert config.llm is not None  # OptimizeConfig requires it unless offline
        llm = make_llm(config.llm)
    base = LLMProposer(llm)
    if not config.sandbox.is_cuda or config.offline_seeds <= 0:
        return base  # generated kernels are CUDA: no use as seeds of a CPU run
    off = OfflineGenerator(problem, seed=seed)
    try:
        off.plan()
    except TraceError as e:
        log.info("no offline seeds: %s", e)  # untraceable, or nothing to fuse: the LLM starts alone
        return base
    return SeededProposer(base, OfflineProposer(off), config.offline_seeds)


__all__ = ["ArchiveSeeded", "LLMProposer", "OfflineProposer", "Proposal", "Proposer", "SeededProposer", "make_proposer"]
