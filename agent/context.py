"""What the graph's nodes need besides the state: the run's collaborators, injected per run.

LangGraph passes this to every node as `runtime.context`; tests inject fakes here rather than
patching module globals.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kevolve.agent.config import OptimizeConfig
from kevolve.agent.evolution import NoveltyIndex
from kevolve.agent.prompting import Prompts
from kevolve.agent.proposer import Proposer
from kevolve.agent.rundir import RunFolder
from kevolve.records import Candidate, Evaluation, Problem
from kevolve.sandbox import Sandbox
from kevolve.sandbox.build.service import Prebuilder

Retriever = Callable[[str, int], list[object]]
Storer = Callable[[Problem, Candidate, Evaluation, str], object]
"""Called with (problem, candidate, evaluation, run id) as each evaluation returns (an `Ingestor`)."""


@dataclass
class Context:
    """The collaborators of one run."""

    proposer: Proposer
    """Writes each job's candidate (an LLM, already wrapped in the disk cache when one is configured; the
    offline generator; or both)."""
    sandbox: Sandbox
    """Evaluates candidates; never raises for a bad one."""
    config: OptimizeConfig
    """The run's whole configuration; nodes read their own slice."""
    run: RunFolder
    """Where every candidate and evaluation is written as it finishes."""
    novelty: NoveltyIndex
    """Sources proposed so far (rebuilt from the state; never checkpointed)."""
    retrieve: Retriever | None = None
    """The archive's `retrieve(problem_source, k)`, when the archive provides one and it is wanted."""
    store: Storer | None = None
    """Offered each evaluated candidate the moment its verdict exists (None: ingest is off)."""
    prebuild: Prebuilder | None = None
    """Handed each new candidate's source as it is proposed, to compile its extensions while earlier
    candidates are evaluated (sandbox/build/service.py); None: the evaluation worker builds them."""
    prompts: Prompts = field(default_factory=Prompts)
    """The prompt files (the package's, or overrides from config.prompts_dir)."""
    fatal: str | None = None
    """Set by the first permanent LLM error (bad key, unknown model): no further call is sent."""
    eval_slots: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(1))
    """Evaluations allowed at once (config.parallel_evaluations): timings must not overlap."""
    lanes: queue.Queue[str] | None = None
    """The devices free for an evaluation (OptimizeConfig.lanes); an evaluation takes one and gives it back. None:
    every evaluation on config.sandbox.device."""
    session_started: float = field(default_factory=time.time)
    """When this session's search (the first run, or a --resume) began, epoch seconds: a generation interrupted in
    an earlier session counts its time from here, never the hours the run lay stopped."""
