"""The judge's bound on the time left (sandbox/judge/eta.py, `kevolve eval`'s ETA, issue 37) holds the timing loop's
real stop rule (schedule.enough): the loop is run here with `enough` itself, on times that never settle (the loop
runs to a cap) and on times that settle at once, and the bound must be at least the time the loop took, and on a
loop that runs to its cap, within one timed pair of it. No ETA where nothing is measured yet."""

from __future__ import annotations

import itertools

import pytest

from kevolve.sandbox.judge.eta import Plan, left_s, timing_left
from kevolve.sandbox.judge.schedule import enough


def plan(**kw: object) -> Plan:
    base = dict(correctness_calls=12, batch_n=1, trials=30, max_timing_s=10.0, timing_draws=0, fresh=0,
                clock_calls=0, reference=True, eager_s=0.001, profile=True, ablation=True)
    return Plan(**{**base, **kw})  # type: ignore[arg-type]


def pairs_until_stopped(p: Plan, pair_s: float, settle: bool) -> int:
    """session._timing's loop on a clock of `pair_s` a timed pair: how many pairs before it stops."""
    noisy = itertools.cycle([1.0, 1.3, 0.8, 1.6, 0.7])
    cand: list[float] = []
    ref: list[float] = []
    for i in itertools.count(1):
        cand.append(1.0 if settle else next(noisy))
        ref.append(2.0 if settle else 2 * next(noisy))
        if enough(cand, ref, p.trials, i * pair_s, p.max_timing_s) or (
                p.timing_draws and (i + 1) * p.batch_n > p.timing_draws):
            return i
    raise AssertionError("unreachable")


CASES = [dict(trials=30, max_timing_s=10.0), dict(trials=3, max_timing_s=10.0), dict(trials=1, max_timing_s=0.5),
         dict(trials=30, max_timing_s=2.0, timing_draws=40, batch_n=4), dict(trials=5, max_timing_s=1.0)]


@pytest.mark.parametrize("pair_s", [0.0005, 0.02, 0.3, 4.0])
@pytest.mark.parametrize("kw", CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_the_timing_bound_covers_the_loop_and_is_tight_when_it_runs_to_a_cap(kw: dict, pair_s: float) -> None:
    p = plan(**kw)
    bound = timing_left(p, 0, 0.0, pair_s, call_s=0.0)
    took = pairs_until_stopped(p, pair_s, settle=False) * pair_s
    assert took <= bound + 1e-9 and bound - took <= pair_s + 1e-9, (took, bound)
    assert pairs_until_stopped(p, pair_s, settle=True) * pair_s <= bound + 1e-9  # steady early: well within


def test_the_bound_goes_down_as_timing_goes_on_and_counts_the_never_seen_calls() -> None:
    p = plan(fresh=3)
    bounds = [timing_left(p, k, k * 0.05, 0.05, call_s=0.01) for k in range(0, 400, 20)]
    assert bounds == sorted(bounds, reverse=True) and bounds[0] > bounds[-1]
    assert timing_left(p, 0, 0.0, 0.05, 0.01) == pytest.approx(timing_left(plan(), 0, 0.0, 0.05, 0.01) + 6 * 0.01)


def test_no_bound_before_anything_is_measured() -> None:
    p = plan()
    assert left_s(p, "compile", 0, 0.0, None, None) is None  # the build: nothing measures it ahead
    assert left_s(p, "correctness", 0, 0.0, None, None) is None  # before the first checked call
    assert left_s(p, "reference", 0, 0.0, 0.01, None) is None  # the reference's preparation: not the session's
    with_call = left_s(p, "correctness", 1, 0.01, 0.01, None)
    assert with_call is not None and with_call > left_s(p, "timing", 0, 0.0, 0.01, None)  # type: ignore[operator]
    assert left_s(p, "finish", 0, 0.0, 0.01, 0.02) == 0.0
