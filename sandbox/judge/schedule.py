"""When to stop timing a candidate beside its reference (runs in the judge): the stop rule itself (`steady`) and the
record of times (`stats`) are common/timing.py's, written once."""

from __future__ import annotations

from kevolve.sandbox.common.timing import steady

FRESH_EVERY = 8  # a never-seen draw is timed after every this many timed calls
SLOWER = 2.0  # a candidate whose fastest call is this many times the reference's slowest is plainly slower
# A call shorter than this is never too slow (max_slowdown, session.py `_too_slow`): a fast reference's hundredfold
# costs nothing worth stopping for, and a contended machine's hiccup of a few hundred ms must not end an honest run.
SLOW_FLOOR_S = 0.5


def stop_reason(cand: list[float], ref: list[float], trials: int, elapsed: float, max_s: float,
                race_ms: float | None = None) -> str | None:
    """Why timing stops now (None: go on): both medians steady, or out of time with at least five of each, or (five
    of each) every candidate call so far took more than twice the reference's slowest: the speedup is below 0.5
    whatever more calls would add, and its second digit helps nobody (an offline softmax 121x slower than eager
    spent 10.5 s on eight timed calls on the H100, 2026-11-24); or more than twice `race_ms`, the median call of the
    best candidate a search already holds (racing, issue 36: a fitness needs no more digits than selection uses,
    and a candidate at half the best's speed is never selected over it). Only the count of calls changes: never a
    verdict."""
    if min(len(cand), len(ref) if ref else 5) >= 5:  # a settled comparison named before the clock (a busy machine's
        if ref and min(cand) > SLOWER * max(ref):     # five batches past max_s said only "out of time", CI 2026-11-28)
            return f"every call over {SLOWER:g}x the reference's slowest"
        if race_ms and min(cand) > SLOWER * race_ms:
            return f"every call over {SLOWER:g}x the search's best ({race_ms:.4g} ms)"
        if elapsed >= max_s:
            return f"out of time ({max_s:g} s)"
    if steady(cand, trials) and (not ref or steady(ref, trials)):
        return "medians steady"
    return None


def enough(cand: list[float], ref: list[float], trials: int, elapsed: float, max_s: float) -> bool:
    """`stop_reason` says stop (no race)."""
    return stop_reason(cand, ref, trials, elapsed, max_s) is not None


def slow_limit_ms(factor: float, eager_ms: float | None) -> float | None:
    """A call slower than this (ms, by the judge's clock) counts toward `max_slowdown`'s stop; None: no such stop."""
    return None if not factor or eager_ms is None else max(SLOW_FLOOR_S * 1e3, factor * eager_ms)


def too_slow_reason(judge_ms: float, eager_ms: float, factor: float) -> str:
    return (f"too_slow: calls take {judge_ms / 1e3:.2f} s, {judge_ms / eager_ms:,.0f}x the reference's {eager_ms:.3f} "
            f"ms (stopped past {factor:g}x and {SLOW_FLOOR_S:g} s a call, two of three calls: --max-slowdown)")


__all__ = ["FRESH_EVERY", "SLOWER", "SLOW_FLOOR_S", "enough", "slow_limit_ms", "stop_reason", "too_slow_reason"]
