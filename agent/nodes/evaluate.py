"""evaluate: run one candidate through the sandbox; persist the verdict (run folder, then archive) once it exists."""

from __future__ import annotations

import logging
import os
from typing import Any

from langgraph.runtime import Runtime

from kevolve.agent.context import Context
from kevolve.agent.state import Trial
from kevolve.records import Evaluation, Outcome, Problem
from kevolve.runfiles import RUN_FORMAT, TrialLine
from kevolve.sandbox.parent.make import evaluate_with_retries

log = logging.getLogger(__name__)


def _evaluate(ctx: Context, problem: Problem, trial: Trial, race_ms: float | None = None) -> tuple[Evaluation, bool]:
    """The verdict, and whether it was recovered from the run folder (persisted before a kill); `race_ms`: the
    search's best's median call, which the timing stops at once plainly slower than (OptimizeConfig.race)."""
    assert trial.candidate is not None
    prior = ctx.run.load_evaluation(trial.candidate.id)
    if prior is not None and prior.outcome is not Outcome.INFRA_ERROR:
        return prior, True
    ctx.run.save_candidate(trial.candidate)
    log.info("%s evaluating %s (%s)", trial.job.id, trial.candidate.id, trial.job.operator.value)
    config = ctx.config.sandbox
    if race_ms and ctx.config.race:
        config = config.model_copy(update={"race_ms": race_ms})
    with ctx.eval_slots:  # the sandbox's one retry rule: infra_error is retried, never scored
        lane = ctx.lanes.get() if ctx.lanes is not None else None
        try:
            if lane is not None and lane != config.device:
                config = config.model_copy(update={"device": lane})
            ev, _attempts = evaluate_with_retries(ctx.sandbox, problem, trial.candidate, config)
        finally:
            if lane is not None:
                ctx.lanes.put(lane)  # type: ignore[union-attr]
    ctx.run.save_candidate(trial.candidate, ev)
    return ev, False


def _ingest(ctx: Context, problem: Problem, trial: Trial) -> None:
    """Offer the verdict to the archive now, in its own transaction: a kill later keeps it. A recovered
    verdict is offered again (the archive stores the same evaluation once)."""
    if ctx.store is None:
        return
    assert trial.candidate is not None and trial.evaluation is not None
    try:
        ctx.store(problem, trial.candidate, trial.evaluation, ctx.run.run_id)
    except Exception as e:  # noqa: BLE001 — the archive is a copy: the run folder already holds the verdict
        first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        if (ctx.run.run_id, first) in _SAID:  # a missing package fails every candidate alike: said once a run
            log.debug("archive: could not store %s: %s", trial.candidate.id, first)
            return
        _SAID.add((ctx.run.run_id, first))
        log.warning("archive: could not store %s: %s (not repeated for this run's later candidates)",
                    trial.candidate.id, first)


_SAID: set[tuple[str, str]] = set()  # (run id, reason) warned of


def evaluate(task: dict[str, Any], runtime: Runtime[Context]) -> dict[str, object]:
    ctx = runtime.context
    trial: Trial = task["trial"]
    recovered = False
    if trial.status == "evaluated" and trial.evaluation is None:
        ev, recovered = _evaluate(ctx, task["problem"], trial, task.get("race_ms"))
        status = "infra_error" if ev.outcome is Outcome.INFRA_ERROR else "evaluated"
        trial = trial.model_copy(update={"evaluation": ev, "status": status})
    elif trial.candidate is not None:
        ctx.run.save_candidate(trial.candidate)
    ev = trial.evaluation
    if trial.status == "evaluated" and ev is not None:
        _ingest(ctx, task["problem"], trial)
    sp = trial.speedup
    log.info("%s %-9s %-10s %s%s", trial.job.id, trial.job.operator.value, trial.status,
             ev.outcome.value if ev else trial.note, f" {sp:.2f}x" if sp else "")
    ctx.run.log_trial(TrialLine(
        format=RUN_FORMAT, job=trial.job.id, generation=trial.job.generation, island=trial.job.island,
        operator=trial.job.operator, status=trial.status, candidate=trial.candidate_id, parents=trial.job.parent_ids,
        outcome=ev.outcome.value if ev else None, reason=ev.reason if ev else trial.note, speedup=sp,
        cost_usd=trial.cost_usd, llm_cached=trial.llm_cached, recovered=recovered, pid=os.getpid()))
    return {"trials": [trial]}
