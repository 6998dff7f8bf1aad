"""plan: the next generation's jobs (repairs first, then mutate / crossover / translate)."""

from __future__ import annotations

import logging
import time

from langgraph.runtime import Runtime

from kevolve.agent.context import Context
from kevolve.agent.evolution import plan_jobs
from kevolve.agent.state import RunState

log = logging.getLogger(__name__)


def plan(state: RunState, runtime: Runtime[Context]) -> dict[str, object]:
    ctx = runtime.context
    trials = state.get("trials", [])
    ctx.novelty.sync(trials)
    gen = state.get("generation", 0)
    evaluated = sum(1 for t in trials if t.status == "evaluated")
    islands = state.get("islands") or [[] for _ in range(ctx.config.evolution.islands)]
    jobs = plan_jobs(trials, islands, gen, ctx.config.stop.max_candidates - evaluated, ctx.config.evolution)
    log.info("generation %d: %s", gen, ", ".join(f"{j.operator.value}@{j.island}" for j in jobs) or "nothing")
    update: dict[str, object] = {"jobs": jobs, "generation_started": time.time()}
    if not jobs:
        update["stop_reason"] = "nothing_to_propose: no job left within the limits"
    return update
