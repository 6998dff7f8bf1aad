"""select: fold the generation's verdicts into the islands, migrate, track the best, apply stop rules."""

from __future__ import annotations

import logging
import time

from langgraph.runtime import Runtime

from kevolve.agent.budget import budget_line, next_cost
from kevolve.agent.context import Context
from kevolve.agent.evolution import best_candidate, by_id, migrate, stop_reason, update_islands
from kevolve.agent.state import RunState

log = logging.getLogger(__name__)


def select(state: RunState, runtime: Runtime[Context]) -> dict[str, object]:
    cfg = runtime.context.config
    trials = state.get("trials", [])
    gen = state.get("generation", 0)
    index = by_id(trials)
    new = [t for t in trials if t.job.generation == gen]
    islands = update_islands(state.get("islands") or [[] for _ in range(cfg.evolution.islands)], new, index,
                             cfg.evolution)
    if cfg.evolution.islands > 1 and (gen + 1) % cfg.evolution.migration_every == 0:
        islands = migrate(islands, index, cfg.evolution)
    best = best_candidate(trials)
    history = [*state.get("best_history", []), (best.speedup or 0.0) if best else 0.0]
    now = time.time()
    since = max(state.get("generation_started", now), runtime.context.session_started)  # not the time stopped
    elapsed = state.get("elapsed_s", 0.0) + max(0.0, now - since)
    reason = stop_reason(trials, history, elapsed, gen + 1, cfg.stop, next_cost(cfg, trials))
    log.info("generation %d done: best %s (%.2fx), islands %s; used %s%s", gen, best.candidate_id if best else "-",
             history[-1], [len(m) for m in islands], budget_line(trials, cfg.stop, elapsed),
             f"; stop: {reason}" if reason else "")
    return {"islands": islands, "best_id": best.candidate_id if best else None, "best_history": history,
            "elapsed_s": elapsed, "generation": gen + 1, "stop_reason": reason}
