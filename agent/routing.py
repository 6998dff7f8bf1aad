"""Routing: small pure functions of the state, tested with hand-built states (the repair policy, a rule
about one trial, is in evolution.py beside selection)."""

from __future__ import annotations

from typing import Literal

from langgraph.types import Send

from kevolve.agent.evolution import best_candidate
from kevolve.agent.state import RunState


def after_plan(state: RunState) -> list[Send] | Literal["finish"]:
    """Fan the generation's jobs out to `propose` (one task each), or finish if there are none."""
    jobs = state.get("jobs") or []
    if state.get("stop_reason") or not jobs:
        return "finish"
    # Evaluated trials only: a later duplicate carries the same candidate id but no verdict.
    trials = {t.candidate.id: t for t in state.get("trials", []) if t.candidate is not None and t.evaluation}
    return [Send("propose", {"job": j, "problem": state["problem"], "examples": state.get("examples", []),
                             "parents": [trials[p] for p in j.parent_ids if p in trials],
                             "race_ms": race_ms(trials.values())})
            for j in jobs]


def race_ms(trials: object) -> float | None:
    """The median call (ms, the judge's clock) of the best candidate so far: what this generation's candidates are
    timed against (SandboxConfig.race_ms); None before any is correct."""
    best = best_candidate(trials)  # type: ignore[arg-type]
    timing = best.evaluation.timing if best is not None and best.evaluation is not None else None
    return timing.median_ms if timing is not None else None


def after_select(state: RunState) -> Literal["plan", "finish"]:
    """Another generation, unless a stop rule fired."""
    return "finish" if state.get("stop_reason") else "plan"
