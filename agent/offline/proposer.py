"""The offline proposer behind the agent's LLM interface, so the same LangGraph loop drives it.

`OfflineLLM.complete(messages)` answers each job from the prompt alone: a translate prompt gets a
generated candidate (the defaults first, then fresh parameter draws); a mutate, crossover or repair
prompt carries its parents' sources, whose `# kevolve-offline:` line gives their parameters, which
are mutated or crossed. `SeededLLM` puts offline candidates into an LLM run's first generation.
"""

from __future__ import annotations

import logging
import random
import threading

from kevolve.agent.llm.base import LLM, Completion, Message, NonRetryableLLMError
from kevolve.agent.offline.generate import Plan, plan
from kevolve.agent.offline.space import MARK, KernelParams, crossover, decode, mutate
from kevolve.agent.offline.trace import TraceError

from kevolve.records import Problem

log = logging.getLogger(__name__)


def parent_params(text: str, problem_id: str, n_groups: int) -> list[list[KernelParams]]:
    """Parameters of every offline candidate of this problem quoted in a prompt (in order)."""
    out = []
    for chunk in text.split(MARK)[1:]:
        got = decode(MARK + chunk.split("\n", 1)[0], problem_id)
        if got is not None and len(got) == n_groups:
            out.append(got)
    return out


class OfflineLLM:
    """Proposes generated kernels for one problem; no network, no tokens, no cost."""

    name = "offline"

    def __init__(self, problem: Problem, seed: int = 0) -> None:
        self.problem = problem
        self._plan: Plan | None = None
        self._error: str | None = None
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._translations = 0

    def plan(self) -> Plan:
        """The traced problem (traced once); raises NonRetryableLLMError with the trace verdict."""
        with self._lock:
            if self._plan is None and self._error is None:
                try:
                    self._plan = plan(self.problem)
                except TraceError as e:
                    self._error = str(e)
            if self._plan is None:
                raise NonRetryableLLMError(f"offline proposer: {self._error}")
            return self._plan

    def params_for(self, prompt: str) -> list[KernelParams]:
        """The next parameter choice for a prompt (see the module docstring)."""
        p = self.plan()
        parents = parent_params(prompt, self.problem.id, len(p.fused))
        with self._lock:
            rng = self._rng
            if len(parents) >= 2:
                return [crossover(a, b, f.group, rng) for a, b, f in zip(parents[0], parents[1], p.fused, strict=True)]
            if parents:
                k = rng.randrange(len(p.fused))
                return [mutate(x, f.group, rng) if i == k else x for i, (x, f) in enumerate(zip(parents[0], p.fused, strict=True))]
            self._translations += 1
            if self._translations == 1:
                return p.legalize(p.defaults())
            return [mutate(x, f.group, rng) for x, f in zip(p.defaults(), p.fused, strict=True)]

    def complete(self, messages: list[Message], **opts: object) -> Completion:
        prompt = next((m.content for m in reversed(messages) if m.role == "user"), "")
        source = self.plan().source(self.params_for(prompt))
        return Completion(text=f"```python\n{source}```\n", model=self.name)


class SeededLLM:
    """An LLM whose run starts with offline candidates: the first `seeds` translate jobs of generation
    0 are answered by the offline proposer, everything else by `llm` (mutations of offline parents
    included, so the LLM can improve on them)."""

    def __init__(self, llm: LLM, offline: OfflineLLM, seeds: int = 1) -> None:
        self.llm, self.offline, self.seeds = llm, offline, seeds
        self.name = llm.name
        self._given = 0
        self._lock = threading.Lock()

    def complete(self, messages: list[Message], **opts: object) -> Completion:
        sample = str(opts.get("sample", ""))
        first_gen = sample.split(":", 1)[-1].startswith("g0-")
        with self._lock:
            take = first_gen and self._given < self.seeds
            self._given += take
        if take:
            try:
                return self.offline.complete(messages, **opts)
            except NonRetryableLLMError as e:  # nothing to fuse / untraceable: the LLM translates instead
                log.info("no offline seed: %s", e)
        return self.llm.complete(messages, **opts)


OFFLINE_SPEC, OFFLINE_URL = "compatible:offline", "http://offline"
"""How an offline run's config names its proposer (the config needs an LLM slot; nothing is called)."""


def proposer_for(problem: Problem | None, config: object, *, offline: bool, runs_dir: object = None,
                 resume: str | None = None, seeds: int = 1) -> LLM | None:
    """The proposer an entry point passes to `run_optimize`: the OfflineLLM for offline runs (a resumed
    one reads its problem from the run folder), a SeededLLM for LLM runs on CUDA whose module traces,
    else None (run_optimize makes the configured LLM itself)."""
    from kevolve.agent.llm import make_llm
    from kevolve.agent.rundir import RunFolder

    if problem is None and resume is not None:
        run = RunFolder.find(runs_dir, resume)  # type: ignore[arg-type]
        problem = run.problem() if run is not None else None
    if problem is None:
        return None
    seed = config.evolution.seed  # type: ignore[attr-defined]
    if offline:
        return OfflineLLM(problem, seed=seed)
    if not config.sandbox.is_cuda or seeds <= 0:  # type: ignore[attr-defined]
        return None  # generated kernels are CUDA: no use as seeds of a CPU run
    off = OfflineLLM(problem, seed=seed)
    try:
        off.plan()
        llm = make_llm(config.llm)  # type: ignore[attr-defined]
    except NonRetryableLLMError:
        return None  # untraceable (the LLM starts alone) or a bad LLM setting (run_optimize reports it)
    return SeededLLM(llm, off, seeds)
