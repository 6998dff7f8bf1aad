"""Routing: small pure functions of the state (or of one trial), tested with hand-built states."""

from __future__ import annotations

from typing import Literal

from langgraph.types import Send

from kevolve.agent.state import RunState, Trial
from kevolve.records import Outcome

_REPAIRABLE = {Outcome.COMPILE_ERROR, Outcome.INCORRECT, Outcome.RUNTIME_ERROR, Outcome.REJECTED,
               Outcome.TIMEOUT, Outcome.CRASHED}


def next_step(trial: Trial, max_repairs: int) -> Literal["evolve", "repair", "drop"]:
    """A correct candidate goes to evolution; a failed one to repair (with its compiler log or its
    mismatch) while its lineage has repairs left; anything else is dropped."""
    ev = trial.evaluation
    if ev is None:
        return "drop"
    if ev.ok:
        return "evolve"
    if ev.outcome in _REPAIRABLE and trial.repair_depth < max_repairs:
        return "repair"
    return "drop"


def after_plan(state: RunState) -> list[Send] | Literal["finish"]:
    """Fan the generation's jobs out to `propose` (one task each), or finish if there are none."""
    jobs = state.get("jobs") or []
    if state.get("stop_reason") or not jobs:
        return "finish"
    # Evaluated trials only: a later duplicate carries the same candidate id but no verdict.
    trials = {t.candidate.id: t for t in state.get("trials", []) if t.candidate is not None and t.evaluation}
    return [Send("propose", {"job": j, "problem": state["problem"], "examples": state.get("examples", []),
                             "parents": [trials[p] for p in j.parent_ids if p in trials]})
            for j in jobs]


def after_select(state: RunState) -> Literal["plan", "finish"]:
    """Another generation, unless a stop rule fired."""
    return "finish" if state.get("stop_reason") else "plan"
