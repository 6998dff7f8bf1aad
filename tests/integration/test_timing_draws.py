"""Timed calls on values no call has had before (CPU): the class fix for answers kept from earlier calls.

A memo checked on a few sampled values answered the pool's four repeating draws from memory (red team
2026-11-26, 1.6x); with timing draws every timed call gets inputs that no earlier call saw, copied
into a slot just before it, so nothing kept serves one. Real judge, real runners, the ledger read back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kevolve.contract import load_problem
from kevolve.records import Candidate
from kevolve.sandbox.judge import oracle
from kevolve.sandbox.config import SandboxConfig

FIX = Path(__file__).parent.parent / "fixtures"


def test_every_timed_call_is_on_a_draw_no_earlier_call_saw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kevolve.sandbox.judge.serve import Judge
    from testpaths import BUILD_CACHE

    monkeypatch.chdir(tmp_path)
    prob = load_problem(FIX / "problems" / "relu.py")
    cand = Candidate.from_source((FIX / "solutions" / "relu_cpp.py").read_text(), prob.id)
    cfg = SandboxConfig(device="cpu", isolation="none", seed=5, trials=10, max_timing_s=2.0, cache_dir=BUILD_CACHE,
                        policy_allow=("all",))
    judge = Judge("cpu")
    try:
        ev, facts = judge._evaluate(prob, cand, cfg)
    finally:
        judge.shutdown()
    assert ev.ok, ev.reason
    calls = facts.ledger.calls
    timed = [c for c in calls if c.phase == "timed"]
    assert len(timed) >= 5 and all(c.key.startswith("t") for c in timed), [c.key for c in timed]
    for c in timed:  # no call before it, of any phase, had its values
        assert not [o for o in calls if o.n < c.n and o.key == c.key], c
    assert len(ev.seeds) < 20  # the timing draws' seeds are not part of the record


def test_the_timed_batches_fit_five_times_in_the_draws_the_evidence_leaves(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten timing draws, one kept for the profiled call's evidence: nine for the batches, so batches of one (not of
    two, sized on all ten: CI, 2026-11-29, timing stopped after 4 batches of 2, "never-seen draws used up", before
    the five every stop rule asks for)."""
    from kevolve.sandbox.judge.serve import Judge
    from testpaths import BUILD_CACHE

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(oracle, "TIMING_MAX", 10)
    prob = load_problem(FIX / "problems" / "relu.py")
    cand = Candidate.from_source((FIX / "solutions" / "relu_cpp.py").read_text(), prob.id)
    cfg = SandboxConfig(device="cpu", isolation="none", seed=5, trials=10, max_timing_s=2.0, cache_dir=BUILD_CACHE,
                        policy_allow=("all",), race_ms=1e-6)
    judge = Judge("cpu")
    try:
        ev, facts = judge._evaluate(prob, cand, cfg)
    finally:
        judge.shutdown()
    assert ev.ok, ev.reason
    assert ev.timing is not None and ev.timing.stopped, ev.timing
    assert ev.timing.stopped.startswith("timing stopped after 5 batches of 1: every call over 2x"), ev.timing.stopped


def test_a_problem_too_large_for_timing_draws_keeps_the_rotating_pool(tmp_path: Path) -> None:
    import torch

    prob = load_problem(FIX / "problems" / "relu.py")
    one = 2 * 64 * 1024 * 4  # a draw's inputs and truth
    small = oracle.prepare(prob, 3, 5, torch.device("cpu"), tmp_path, memory_limit=8 * one * (oracle.TIMING_MIN - 1))
    assert small.keys("timing") == [] and len(small.pool) == 4
    roomy = oracle.prepare(prob, 3, 5, torch.device("cpu"), tmp_path, memory_limit=None)
    timing = roomy.keys("timing")
    assert oracle.TIMING_MIN <= len(timing) <= oracle.TIMING_MAX
    assert len({roomy.draws[k].draw.seed for k in timing}) == len(timing)
    assert not set(timing) & set(roomy.pool) and not set(timing) & set(roomy.keys("plain"))
    # each with its own truth, as the pool's draws
    for k in timing[:3]:
        d = roomy.draws[k]
        assert torch.equal(d.truth[0], torch.relu(d.inputs[0]))


def test_small_timing_draws_are_made_on_one_thread_and_the_count_restored(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy machine (CI, 2026-11-29) made under 8 timing draws of the 64x1024 ReLU in 3 s on two threads, whose
    ops waited on each other: none at all, the timed calls back on the pool. Small draws are made on one."""
    import torch

    set_to, real = [], torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (set_to.append(n), real(n))[1])
    before = torch.get_num_threads()
    state = oracle.prepare(load_problem(FIX / "problems" / "relu.py"), 3, 5, torch.device("cpu"), tmp_path,
                           memory_limit=None)
    assert len(state.keys("timing")) == oracle.TIMING_MAX
    assert set_to == [1, before] and torch.get_num_threads() == before
