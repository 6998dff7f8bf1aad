"""How long the rest of one evaluation can take, as the judge knows it: the ETA of `kevolve eval`'s live line (issue
37). Runs in the judge beside session.py; reads the session's schedule and this request's own clock, nothing else.

A bound from the schedule and what this request has measured, or None while something still ahead has no measure:
- the build, and the reference's preparation before it, are measured by nothing before they end: no ETA then;
- correctness: its planned calls (warm-up, checks, the again/in-place pair) at the seconds a checked call has
  taken so far (no ETA before the first);
- timing: the stop rule's caps (schedule.enough): `max_timing_s` once five timed pairs are in (five pairs when
  they take longer), ten times `trials` pairs (steady's last stop), the timing draws running out; at the seconds a
  timed pair has taken (before the first: a checked call's, on each side of each of its calls); plus the
  never-seen draws' calls (a control and the draw, a checked call each);
- then the clock calls (the audit's, a pair each), the profiled call and the ablation: a checked call each (the
  profiler's own start is not counted: it is not known ahead).
The timing phase ends earlier when both medians are steady, so the bound is "up to". The CPU's quiet wait (a spare
runner finishing its start beside the timed cores; usually over) counts as nothing: timing's start reports again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kevolve.sandbox.judge import progress
from kevolve.sandbox.judge.schedule import FRESH_EVERY

_EVERY_S = 1.0  # at most one report a second within a phase (between calls, never inside a timed window)
_AHEAD = ("compile", "correctness", "quiet", "timing", "clock", "profile", "ablation", "finish")


@dataclass(frozen=True)
class Plan:
    """What a session will do, in counts and caps (session.py's schedule for this candidate)."""

    correctness_calls: int  # warm-up, the plain and shifted draws' checks, the again / in-place pair
    batch_n: int  # calls a timed batch holds, on each side
    trials: int  # SandboxConfig.trials: steady's least count of timed pairs
    max_timing_s: float  # SandboxConfig.max_timing_s: out of time once five pairs are in
    timing_draws: int  # never-seen draws the timed batches use up (0: they reuse the pool)
    fresh: int  # never-seen draws timed as single calls, each after a control
    clock_calls: int  # single calls on each side without the pad (the audit's judge clock)
    reference: bool  # the reference runs beside the candidate (timed pairs, clock pairs)
    eager_s: float | None  # the reference's median call, seconds, when the problem was prepared
    profile: bool
    ablation: bool


def timing_left(plan: Plan, pairs: int, elapsed: float, pair_s: float, call_s: float) -> float:
    """Seconds the timing phase can still take after `pairs` timed pairs in `elapsed` s, a pair taking `pair_s`."""
    caps = [max(3, 10 * plan.trials) * pair_s, max(plan.max_timing_s + pair_s, 5 * pair_s)]
    if plan.timing_draws:
        caps.append(max(1, plan.timing_draws // plan.batch_n) * pair_s)
    fresh_left = max(0, plan.fresh - pairs // FRESH_EVERY)
    return max(0.0, min(caps) - elapsed) + 2 * fresh_left * call_s


def after_timing(plan: Plan, call_s: float) -> float:
    """Seconds of the phases after timing: the clock pairs, the profiled call, the ablation."""
    calls = plan.clock_calls * (2 if plan.reference else 1) + plan.profile + plan.ablation
    return calls * call_s


def left_s(plan: Plan, phase: str, done: int, elapsed: float, call_s: float | None, pair_s: float | None) -> float | None:
    """The bound on what is left of the session in `phase`, `done` of its steps (calls, or timed pairs) made in
    `elapsed` s; `call_s`: a checked call's measured seconds, `pair_s`: a timed pair's; None when not known."""
    if phase not in _AHEAD or phase == "compile" or call_s is None:
        return None
    first_pair = plan.batch_n * (call_s + (max(call_s, plan.eager_s or 0.0) if plan.reference else 0.0))
    timing = timing_left(plan, 0, 0.0, first_pair, call_s)
    if phase == "correctness":
        return max(0, plan.correctness_calls - done) * call_s + timing + after_timing(plan, call_s)
    if phase in ("quiet", "timing"):
        if phase == "timing" and done:
            timing = timing_left(plan, done, elapsed, pair_s or first_pair, call_s)
        return timing + after_timing(plan, call_s)
    rest = {"clock": after_timing(plan, call_s), "profile": (plan.profile + plan.ablation) * call_s,
            "ablation": plan.ablation * call_s}
    return max(0.0, rest.get(phase, 0.0) - (elapsed if phase == "clock" else 0.0))


class Eta:
    """Tells the parent each phase the session starts with the bound on what is left (progress.report), and within
    a phase the first bound it can give and then one a second."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.phase_name, self.t0, self.done, self.sent = "", 0.0, 0, 0.0
        self.call_s: float | None = None
        self.pair_s: float | None = None

    def phase(self, name: str) -> None:
        """A phase starts: report it."""
        self.phase_name, self.t0, self.done = name, time.monotonic(), 0
        self._report()

    def step(self) -> None:
        """One step of the phase done (a checked call; in timing, a timed pair): measured, reported now and then."""
        self.done += 1
        elapsed = time.monotonic() - self.t0
        if self.phase_name == "correctness":
            first = self.call_s is None
            self.call_s = elapsed / self.done
        elif self.phase_name == "timing":
            first = self.pair_s is None
            self.pair_s = elapsed / self.done
        else:
            return
        if first or time.monotonic() - self.sent >= _EVERY_S:
            self._report()

    def _report(self) -> None:
        self.sent = time.monotonic()
        progress.report(self.phase_name, left_s(self.plan, self.phase_name, self.done, self.sent - self.t0,
                                                self.call_s, self.pair_s))


def plan_of(session: Any) -> Plan:
    """The plan of session.py's `Session` for its candidate (counts from its state and config)."""
    st, cfg = session.state, session.config
    plain = st.keys("plain")
    timing = [k for k in st.keys("timing") if k not in session.evidence]
    return Plan(correctness_calls=cfg.warmup + len(plain) + len(st.keys("shifted")) + (2 if len(plain) >= 2 else 0),
                batch_n=session.batch_n, trials=cfg.trials, max_timing_s=cfg.max_timing_s, timing_draws=len(timing),
                fresh=len(st.keys("fresh")), clock_calls=session.unpadded, reference=session.eager is not None,
                eager_s=None if session.eager_ms is None else session.eager_ms / 1e3, profile=cfg.profile,
                ablation=not cfg.allow_torch_only)


__all__ = ["Eta", "Plan", "after_timing", "left_s", "plan_of", "timing_left"]
