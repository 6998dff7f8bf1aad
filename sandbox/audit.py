"""The independent audit of an accepted candidate (runs in the judge).

An `ok` verdict is measured again before it counts as a winner: a fresh runner process, fresh
inputs (a new seed, so new draws and a new truth), every call's output compared again, and a second
timer that does not live in the candidate's process — the judge's own clock around calls made
without the GPU pad, candidate and reference alternating. What the judge's clock adds to a call
(channel, flushes, checks) is the same for both runners and is read off the reference, whose own
times are trusted. The audit overturns the verdict (`audit_mismatch`) when its own evaluation is
not ok, when its speedup differs from the original's by more than 10 %, when the judge's clock
sees the candidate slower than eager end to end while the original claimed a speedup, or when it sees
the candidate's call take more than twice the claimed time plus what launching a forward may cost
(LAUNCH_MS): work hidden from the runner's timer.
"""

from __future__ import annotations

import math
import statistics

from kevolve.records import Audit, Evaluation, Outcome

AGREE = 0.10  # the audit's speedup may differ from the original's by this fraction
CLOCK_CALLS = 40
# Device time (the runner's timer, GPU queue pre-filled) and end-to-end time (the judge's clock,
# launch included) legitimately differ: by the forward's host-side launch work and by the noise of the
# judge's clock itself. An offline CuPy GELU on the H100 (2026-11-25): 0.19 ms on the GPU, 0.35 ms end
# to end in a plain process, and 0.14, 0.37, 0.38, 0.55 and 0.73 ms by the judge's clock in five audits
# in fresh processes (medians of 20-40 pairs whose interquartile range was 0.34-0.55 ms). The judge's
# clock may see the candidate's call take up to CLOCK_SLACK times its claimed device time plus LAUNCH_MS
# before the claim is called a mismatch: work hidden from the runner's timer below that is not seen here
# (docs/VERIFICATION.md, Known limits).
CLOCK_SLACK = 2.0
LAUNCH_MS = 1.0


def judge_clock(clock: list[tuple[float, float, float, float]], stage_ms: float = 0.0) -> tuple[float, float, float] | None:
    """(candidate's call end to end, reference's call, spread of the candidate's) in ms by the judge's
    clock; None without enough calls.

    Pairwise: each candidate call against the reference call right after it, so that drift of the
    machine between pairs cancels; what the judge's clock adds to a call (channel, sync, checks: the
    reference's wall less its own trusted time) is taken off, and so is `stage_ms`, what staging the
    candidate's outputs adds to each of its calls and not to the reference's (measured by the judge
    before the candidate's code was loaded: session._staging_cost). The spread is the interquartile
    range of the pairs (the H100, sub-millisecond kernels: medians of 20 pairs moved by ~0.15 ms
    between two audits of the same candidate).
    """
    if len(clock) < 5:
        return None
    pairs = sorted(wc - (wr - mr) - max(stage_ms, 0.0) for wc, _mc, wr, mr in clock)
    q = statistics.quantiles(pairs, n=4)
    ref = statistics.median(mr for _wc, _mc, _wr, mr in clock)
    return max(statistics.median(pairs), 1e-6), ref, q[2] - q[0]


def judge_clock_speedup(clock: list[tuple[float, float, float, float]], stage_ms: float = 0.0) -> float | None:
    """Eager / candidate end to end by the judge's clock (`judge_clock`); None without enough calls."""
    got = judge_clock(clock, stage_ms)
    return None if got is None else got[1] / got[0]


def beyond_noise(clock_ms: float | None, clock_speedup: float, spread_ms: float | None) -> bool:
    """Whether the judge's clock sees the candidate slower than 0.9x eager by more than twice the
    standard error of its median (from the pairs' interquartile range, normal noise assumed): on a
    sub-millisecond call the judge's clock spreads by more than the call itself (the H100: IQR
    0.4-0.8 ms over 40 pairs next to a 0.34 ms cross-entropy), and a coin flip is not a verdict."""
    if clock_ms is None or not spread_ms:
        return True
    ref_ms = clock_speedup * clock_ms
    se = 1.2533 * (spread_ms / 1.349) / math.sqrt(CLOCK_CALLS)
    return clock_ms - ref_ms / 0.9 > 2 * se


def decide(original: Evaluation, again: Evaluation, clock_speedup: float | None, seeds: tuple[int, ...],
           wall_s: float, agree: float = AGREE, stage_ms: float = 0.0, clock_ms: float | None = None,
           clock_spread_ms: float | None = None) -> Evaluation:
    """The original evaluation with its audit attached, overturned when the audit disagrees.

    `clock_ms`: the candidate's call end to end by the judge's clock (`judge_clock`); when None it is
    read off `clock_speedup` and the original's reference time."""
    s0, s1 = original.speedup, again.speedup
    claim_ms = original.timing.median_ms if original.timing is not None else None
    if clock_ms is None and clock_speedup and original.ref_timing is not None:
        clock_ms = original.ref_timing.median_ms / clock_speedup
    if not again.ok:
        why = f"audit_mismatch: measured again on fresh inputs in a fresh process: {again.reason}"
    elif s0 is None or s1 is None:
        why = "audit_mismatch: no speedup to compare"
    elif abs(s1 / s0 - 1) > agree:
        why = (f"audit_mismatch: {s1:.3f}x measured again on fresh inputs in a fresh process, {s0:.3f}x "
               f"in the evaluation (more than {agree:.0%} apart)")
    elif clock_speedup is not None and s0 > 1.0 and clock_speedup < 0.9 and beyond_noise(
            clock_ms, clock_speedup, clock_spread_ms):
        why = (f"audit_mismatch: the judge's own clock sees the candidate slower than eager end to end "
               f"({clock_speedup:.3f}x) while its runner's timer claimed {s0:.3f}x")
    elif (clock_speedup is not None and clock_ms is not None and claim_ms is not None and s0 > 1.2
          and clock_ms > CLOCK_SLACK * claim_ms + LAUNCH_MS):
        why = (f"audit_mismatch: the runner's timer claims {s0:.3f}x ({claim_ms:.3f} ms a call), the judge's "
               f"own clock sees {clock_speedup:.3f}x ({clock_ms:.3f} ms end to end: more than {CLOCK_SLACK:g}x "
               f"the claim and {LAUNCH_MS:g} ms of launch work)")
    else:
        why = ""
    less = f", less {stage_ms:.3f} ms a call of output staging" if stage_ms >= 0.001 else ""
    if less and "judge's own clock" in why:
        why += f" (judge's clock{less})"
    audit = Audit(passed=not why, reason=why or f"ok: {s1:.3f}x again on fresh inputs (judge's clock: "
                  + (f"{clock_speedup:.3f}x end to end{less})" if clock_speedup is not None else "n/a)"),
                  speedup=s1, judge_clock_speedup=clock_speedup, staging_ms=stage_ms, clock_ms=clock_ms,
                  clock_spread_ms=clock_spread_ms, seeds=seeds, wall_s=wall_s)
    if why:
        return original.model_copy(update={"outcome": Outcome.REJECTED, "reason": why, "audit": audit})
    return original.model_copy(update={"audit": audit})


__all__ = ["AGREE", "CLOCK_CALLS", "CLOCK_SLACK", "LAUNCH_MS", "decide", "judge_clock", "judge_clock_speedup"]
