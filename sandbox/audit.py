"""The independent audit of an accepted candidate (runs in the judge).

An `ok` verdict is measured again before it counts as a winner: a fresh runner process, fresh
inputs (a new seed, so new draws and a new truth), every call's output compared again, and a second
timer that does not live in the candidate's process — the judge's own clock around calls made
without the GPU pad, candidate and reference alternating. What the judge's clock adds to a call
(channel, flushes, checks) is the same for both runners and is read off the reference, whose own
times are trusted. The audit overturns the verdict (`audit_mismatch`) when its own evaluation is
not ok, when its speedup differs from the original's by more than 10 %, or when the judge's clock
sees the candidate slower than eager end to end while the original claimed a speedup.
"""

from __future__ import annotations

import statistics

from kevolve.records import Audit, Evaluation, Outcome

AGREE = 0.10  # the audit's speedup may differ from the original's by this fraction
CLOCK_CALLS = 20
# Device time (the runner's timer, GPU queue pre-filled) and end-to-end time (the judge's clock,
# launch included) legitimately differ for launch-bound forwards; a claim beyond twice what the
# judge's clock allows is not launch overhead.
CLOCK_SLACK = 2.0


def judge_clock_speedup(clock: list[tuple[float, float, float, float]], stage_ms: float = 0.0) -> float | None:
    """Eager / candidate end to end by the judge's clock; None without enough calls.

    `stage_ms`: what staging the candidate's outputs adds to each of its calls and not to the
    reference's (measured by the judge before the candidate's code was loaded: session._staging_cost).
    """
    if len(clock) < 5:
        return None
    # Pairwise: each candidate call against the reference call right after it, so that drift of
    # the machine between pairs cancels; what the judge's clock adds is (reference wall - its time).
    cand = statistics.median(wc - (wr - mr) for wc, _mc, wr, mr in clock) - max(stage_ms, 0.0)
    ref = statistics.median(mr for _wc, _mc, _wr, mr in clock)
    return ref / max(cand, 1e-6)


def decide(original: Evaluation, again: Evaluation, clock_speedup: float | None, seeds: tuple[int, ...],
           wall_s: float, agree: float = AGREE, stage_ms: float = 0.0) -> Evaluation:
    """The original evaluation with its audit attached, overturned when the audit disagrees."""
    s0, s1 = original.speedup, again.speedup
    if not again.ok:
        why = f"audit_mismatch: measured again on fresh inputs in a fresh process: {again.reason}"
    elif s0 is None or s1 is None:
        why = "audit_mismatch: no speedup to compare"
    elif abs(s1 / s0 - 1) > agree:
        why = (f"audit_mismatch: {s1:.3f}x measured again on fresh inputs in a fresh process, {s0:.3f}x "
               f"in the evaluation (more than {agree:.0%} apart)")
    elif clock_speedup is not None and s0 > 1.0 and clock_speedup < 0.9:
        why = (f"audit_mismatch: the judge's own clock sees the candidate slower than eager end to end "
               f"({clock_speedup:.3f}x) while its runner's timer claimed {s0:.3f}x")
    elif clock_speedup is not None and s0 > CLOCK_SLACK * max(clock_speedup, 1.0) and s0 > 1.2:
        why = (f"audit_mismatch: the runner's timer claims {s0:.3f}x, the judge's own clock sees "
               f"{clock_speedup:.3f}x end to end (more than {CLOCK_SLACK:g}x apart)")
    else:
        why = ""
    less = f", less {stage_ms:.3f} ms a call of output staging" if stage_ms >= 0.001 else ""
    if less and "judge's own clock" in why:
        why += f" (judge's clock{less})"
    audit = Audit(passed=not why, reason=why or f"ok: {s1:.3f}x again on fresh inputs (judge's clock: "
                  + (f"{clock_speedup:.3f}x end to end{less})" if clock_speedup is not None else "n/a)"),
                  speedup=s1, judge_clock_speedup=clock_speedup, staging_ms=stage_ms, seeds=seeds, wall_s=wall_s)
    if why:
        return original.model_copy(update={"outcome": Outcome.REJECTED, "reason": why, "audit": audit})
    return original.model_copy(update={"audit": audit})


__all__ = ["AGREE", "CLOCK_CALLS", "CLOCK_SLACK", "decide", "judge_clock_speedup"]
