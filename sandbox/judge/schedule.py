"""When to stop timing: adaptive trials, judged in the judge on the times runners report."""

from __future__ import annotations

import statistics

from kevolve.records import TimingStats

FRESH_EVERY = 8  # a never-seen draw is timed after every this many timed calls


def steady(times: list[float], trials: int) -> bool:
    """At least `trials` times and a median known to within 0.5 % (or ten times `trials`)."""
    n = len(times)
    if n < max(3, trials):
        return False
    if n >= 10 * trials:
        return True
    q = statistics.quantiles(times, n=4)
    med = statistics.median(times)
    rel_sem = 1.2533 * ((q[2] - q[0]) / 1.349) / (n**0.5) / max(med, 1e-9)
    return rel_sem <= 0.005


SLOWER = 2.0  # a candidate whose fastest call is this many times the reference's slowest is plainly slower


def enough(cand: list[float], ref: list[float], trials: int, elapsed: float, max_s: float) -> bool:
    """Stop timing: both medians steady, or out of time with at least five of each, or (five of each)
    every candidate call so far took more than twice the reference's slowest: the speedup is below
    0.5 whatever more calls would add, and its second digit helps nobody (an offline softmax 121x
    slower than eager spent 10.5 s on eight timed calls on the H100, 2026-11-24)."""
    if min(len(cand), len(ref) if ref else 5) >= 5:
        if elapsed >= max_s or (ref and min(cand) > SLOWER * max(ref)):
            return True
    return steady(cand, trials) and (not ref or steady(ref, trials))


def stats(times: list[float], method: str, walls: list[float] | None = None,
          claimed: list[float] | None = None) -> TimingStats:
    q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
    return TimingStats(
        median_ms=statistics.median(times), mean_ms=statistics.fmean(times), min_ms=min(times),
        max_ms=max(times), iqr_ms=q[2] - q[0], trials=len(times), method=method,
        wall_median_ms=statistics.median(walls) if walls else None,
        claimed_median_ms=statistics.median(claimed) if claimed else None,
    )


__all__ = ["FRESH_EVERY", "SLOWER", "enough", "stats", "steady"]
