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
from kevolve.sandbox.judge import draws, oracle
from kevolve.sandbox.config import SandboxConfig

FIX = Path(__file__).parent.parent / "fixtures"


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "made_again"])
def test_every_timed_call_is_on_a_draw_no_earlier_call_saw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           kept: bool) -> None:
    """`made_again`: no timing draw fits the budget (as a 36 MB draw's), each is made when its call comes."""
    from kevolve.sandbox.judge.serve import Judge
    from testpaths import BUILD_CACHE

    monkeypatch.chdir(tmp_path)
    if not kept:
        monkeypatch.setattr(draws, "TIMING_BYTES", 1)
    prob = load_problem(FIX / "problems" / "relu.py")
    cand = Candidate.from_source((FIX / "solutions" / "relu_cpp.py").read_text(), prob.id)
    cfg = SandboxConfig(device="cpu", isolation="none", seed=5, trials=10, max_timing_s=2.0, cache_dir=BUILD_CACHE,
                        policy_allow=("all",))
    judge = Judge("cpu")
    try:
        ev, facts = judge._evaluate(prob, cand, cfg)
        state = next(iter(judge.problems.values()))[0]
    finally:
        judge.shutdown()
    assert ev.ok, ev.reason
    calls = facts.ledger.calls
    timed = [c for c in calls if c.phase == "timed"]
    assert len(timed) >= 5 and all(c.key.startswith("t") for c in timed), [c.key for c in timed]
    for c in timed:  # no call before it, of any phase, had its values
        assert not [o for o in calls if o.n < c.n and o.key == c.key], c
    assert len(ev.seeds) < 20  # the timing draws' seeds are not part of the record
    assert facts.batch_draws == "timing"
    assert all((state.draws[c.key].remake is None) == kept for c in timed)
    assert (state.remade_s > 0) != kept  # the judge's time making them, which moves the session's deadline


def test_the_timed_batches_fit_five_times_in_the_draws_the_evidence_leaves(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten timing draws, one kept for the profiled call's evidence: nine for the batches, so batches of one (not of
    two, sized on all ten: CI, 2026-11-29, timing stopped after 4 batches of 2, "never-seen draws used up", before
    the five every stop rule asks for)."""
    from kevolve.sandbox.judge.serve import Judge
    from testpaths import BUILD_CACHE

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(draws, "TIMING_MAX", 10)
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


def test_timing_draws_too_large_to_keep_are_made_again_when_their_call_comes(tmp_path: Path) -> None:
    """Fewer than TIMING_MIN kept ones fit: TIMING_MAX seeds, each draw made (inputs, float64 truth) when a call
    needs it, the same bits each time; before, the timed calls rotated through the pool (red team 7's memo, 1.2x)."""
    import torch

    prob = load_problem(FIX / "problems" / "relu.py")
    one = 2 * 64 * 1024 * 4  # a draw's inputs and truth
    small = oracle.prepare(prob, 3, 5, torch.device("cpu"), tmp_path, memory_limit=8 * one * (draws.TIMING_MIN - 1))
    timing = small.keys("timing")
    assert len(timing) == draws.TIMING_MAX and len(small.pool) == 4
    assert all(small.draws[k].remake is not None and small.draws[k].inputs[0].device.type == "meta" for k in timing)
    assert len({small.draws[k].draw.seed for k in timing}) == len(timing)
    x = small.inputs_of(timing[0])[0]
    assert torch.equal(small.truth_of(timing[0])[0], torch.relu(x)) and torch.equal(small.inputs_of(timing[0])[0], x)
    assert not torch.equal(small.inputs_of(timing[1])[0], x)
    prints = small.truth_prints(torch.device("cpu"))  # a made draw's truth print, none for those never made
    assert timing[0] in prints and timing[2] not in prints and all(k in prints for k in small.pool)
    roomy = oracle.prepare(prob, 3, 5, torch.device("cpu"), tmp_path, memory_limit=None)
    timing = roomy.keys("timing")
    assert draws.TIMING_MIN <= len(timing) <= draws.TIMING_MAX
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
    assert draws.TIMING_MIN <= len(state.keys("timing")) <= draws.TIMING_MAX  # how many: the machine's load decides
    assert set_to == [1, before] and torch.get_num_threads() == before


@pytest.mark.parametrize("candidate", ["memo_slows_controls", "honest"])
def test_where_timed_calls_rotate_through_the_pool_a_memo_is_read_against_the_timed_calls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, candidate: str) -> None:
    """No timing draws (none fit, none made again: as on a problem whose remaking costs over 2 s, or the GPU), single
    calls: input_cache compares the never-seen calls with the timed calls themselves. A memo that slowed only the
    controls (red team 8: 26x on six rounds of tanh) is rejected; an honest kernel is not."""
    from kevolve.sandbox.judge import clock
    from kevolve.sandbox.judge.serve import Judge
    from testpaths import BUILD_CACHE

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(draws, "TIMING_BYTES", 1)
    monkeypatch.setattr(draws, "REMADE_TIMING", ())
    monkeypatch.setattr(clock, "BATCH_MS", 1e-6)  # single calls, as a large problem's on the CPU
    prob = load_problem(FIX / "problems" / "relu_2k.py")
    path = (FIX.parent / "adversarial" / "memo_slows_controls.py" if candidate != "honest"
            else FIX / "solutions" / "relu_cpp.py")
    cand = Candidate.from_source(path.read_text(), prob.id)
    cfg = SandboxConfig(device="cpu", isolation="none", seed=5, trials=10, max_timing_s=4.0, cache_dir=BUILD_CACHE,
                        policy_allow=("all",), allow_torch_only=True)
    judge = Judge("cpu")
    try:
        ev, facts = judge._evaluate(prob, cand, cfg)
    finally:
        judge.shutdown()
    assert facts.batch_draws == "pool" and facts.batches and all(w.calls == 1 for w in facts.batches)
    if candidate == "honest":
        assert ev.ok, ev.reason
    else:
        assert ev.reason_code == "input_cache", ev.reason


def test_the_gpu_makes_timing_draws_again_only_where_a_batchs_draws_cost_seconds_at_most() -> None:
    """The H200's 64 MB ReLU: a draw made again in about 12 ms, batches of 16 (2 GiB over 128 MB a call): made
    again. A float64 convolution at 2 s a draw would add minutes to every evaluation at 16 a batch: the pool. The CPU
    keeps its own bound, one draw within REMADE_MAX_S (its large calls come one to a batch)."""
    mb = 2**20
    assert draws.worth_remaking("cuda", 0.012, 128 * mb)
    assert not draws.worth_remaking("cuda", 2.0, 128 * mb)
    assert draws.worth_remaking("cuda", 2.0, 3 * 2**30)  # one call a batch: 2 s within the batch's bound
    assert draws.worth_remaking("cpu", 2.8, 72 * mb)  # red team 8's tanh problem on a busy CPU
    assert not draws.worth_remaking("cpu", draws.REMADE_MAX_S + 1, 72 * mb)


def test_the_gpu_keeps_more_timing_draws_only_where_asked_and_never_fewer_than_the_cpu() -> None:
    """KEVOLVE_GPU_TIMING_DRAWS ("MAX,MB"): a small problem's draws ran out after five batches under the CPU's budgets
    (H200, 2026-11-29); unset or unreadable, the GPU keeps the CPU's, and a budget below them is raised to them."""
    cpu = (draws.TIMING_MAX, draws.TIMING_BYTES)
    assert draws.gpu_budgets("") == cpu and draws.gpu_budgets("many") == cpu and draws.gpu_budgets("1,2,3") == cpu
    assert draws.gpu_budgets("1024,2048") == (1024, 2048 * 2**20)
    assert draws.gpu_budgets("8,1") == cpu
