"""The proposer seam: who writes a job's candidate. An LLM, the offline generator, or an LLM whose run
starts from offline candidates; `make_proposer` builds the one the config asks for, inside `run_optimize`,
so the CLI, `kevolve.optimize()` and `bench --optimize` all get the same.

A proposer sees the job's prompt and its parents' records: an LLM reads the prompt, the offline
generator reads its parents' parameters from their sources (never from the prompt's text).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from kevolve.agent.config import OptimizeConfig
from kevolve.agent.llm.base import LLM, Completion, Message, NonRetryableLLMError
from kevolve.agent.state import Job, Trial
from kevolve.records import Problem

log = logging.getLogger(__name__)


class Proposer(Protocol):
    """Answers one job; raises NonRetryableLLMError to stop the run, LLMError to skip the job."""

    name: str
    """What the candidates' `proposer` field records (e.g. 'openai:gpt-4o', 'offline')."""

    def propose(self, job: Job, parents: Sequence[Trial], messages: list[Message], sample: str) -> Completion: ...


class LLMProposer:
    """An LLM answering the rendered prompt (`sample` keys its reply cache)."""

    def __init__(self, llm: LLM) -> None:
        self.llm, self.name = llm, llm.name

    def propose(self, job: Job, parents: Sequence[Trial], messages: list[Message], sample: str) -> Completion:
        return self.llm.complete(messages, sample=sample)


def make_proposer(problem: Problem, config: OptimizeConfig, llm: LLM | None = None) -> Proposer:
    """The run's proposer: offline (`config.offline`); else the LLM (`llm`, or one made from `config.llm`),
    seeded with `config.offline_seeds` offline translations on a CUDA run whose module traces.
    Raises NonRetryableLLMError for an unusable LLM setting."""
    from kevolve.offline.proposer import OfflineProposer, SeededProposer

    seed = config.evolution.seed
    if config.offline:
        return OfflineProposer(problem, seed=seed)
    if llm is None:
        from kevolve.agent.llm import make_llm

        assert config.llm is not None  # OptimizeConfig requires it unless offline
        llm = make_llm(config.llm)
    base = LLMProposer(llm)
    if not config.sandbox.is_cuda or config.offline_seeds <= 0:
        return base  # generated kernels are CUDA: no use as seeds of a CPU run
    off = OfflineProposer(problem, seed=seed)
    try:
        off.plan()
    except NonRetryableLLMError as e:
        log.info("no offline seeds: %s", e)  # untraceable, or nothing to fuse: the LLM starts alone
        return base
    return SeededProposer(base, off, config.offline_seeds)


__all__ = ["LLMProposer", "Proposer", "make_proposer"]
