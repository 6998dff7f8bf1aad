"""plan: the next generation's jobs (repairs first, then mutate / crossover / translate)."""

from __future__ import annotations

import logging
import time

from langgraph.runtime import Runtime

from kevolve.agent.budget import budget_reason, next_cost, proposals_left
from kevolve.agent.context import Context
from kevolve.agent.evolution import plan_jobs
from kevolve.agent.state import RunState

log = logging.getLogger(__name__)


def plan(state: RunState, runtime: Runtime[Context]) -> dict[str, object]:
    ctx = runtime.context
    trials = state.get("trials", [])
    ctx.novelty.sync(trials)
    gen = state.get("generation", 0)
    islands = state.get("islands") or [[] for _ in range(ctx.config.evolution.islands)]
    call_cost = next_cost(ctx.config, trials)
    jobs = plan_jobs(trials, islands, gen, proposals_left(trials, ctx.config.stop, call_cost), ctx.config.evolution)
    log.info("generation %d: %s", gen, ", ".join(f"{j.operator.value}@{j.island}" for j in jobs) or "nothing")
    update: dict[str, object] = {"jobs": jobs, "generation_started": time.time()}
    if not jobs:
        update["stop_reason"] = (budget_reason(trials, ctx.config.stop, call_cost)
                                 or "nothing_to_propose: no job left within the limits")
    return update
