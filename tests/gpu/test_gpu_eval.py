"""The evaluator on a real CUDA GPU: honest kernels accepted, GPU-only hacks rejected, crashes contained."""

from __future__ import annotations

from pathlib import Path

import pytest

from kevolve.contract import load_problem
from kevolve.records import Candidate, Outcome
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.parent.local import LocalSandbox
from testpaths import ISOLATION

pytestmark = pytest.mark.gpu
HERE = Path(__file__).parent
PROBLEM = HERE.parent / "fixtures" / "problems" / "relu_big.py"


@pytest.fixture(scope="module")
def sandbox() -> LocalSandbox:
    return LocalSandbox()


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> SandboxConfig:
    # policy off: the hack solutions here (l2_persist …) must reach the device-side checks behind it
    return SandboxConfig(device="cuda", seed=7, trials=20, max_timing_s=2.0, compile_baseline="off",
                         cache_dir=tmp_path_factory.mktemp("kevolve-cache"), timeout_s=300, policy_allow=("all",),
                         **ISOLATION)


def evaluate(sandbox: LocalSandbox, config: SandboxConfig, name: str):  # noqa: ANN201
    problem = load_problem(PROBLEM)
    src = (HERE / "solutions" / f"{name}.py").read_text()
    return sandbox.evaluate(problem, Candidate.from_source(src, problem.id), config)


def test_honest_cupy_kernel_is_accepted_with_a_custom_kernel_listed(sandbox, config) -> None:
    ev = evaluate(sandbox, config, "relu_cupy")
    assert ev.outcome is Outcome.OK, ev.reason
    assert any(k.custom and "relu_k" in k.name for k in ev.profile.kernels)
    assert ev.timing.median_ms > 0 and ev.ref_timing.median_ms > 0


def test_both_sides_kernel_order_splits_the_call_into_parts(sandbox, config) -> None:
    """kevolve/where_time.py's parts from the judge's profiled calls: eager's ReLU kernel became the CuPy kernel."""
    from kevolve.where_time import parts

    ev = evaluate(sandbox, config, "relu_cupy")
    assert ev.outcome is Outcome.OK, ev.reason
    assert ev.profile.order and ev.ref_profile is not None and ev.ref_profile.order
    got = parts(ev)
    # part 1 is the ReLU (eager's elementwise kernel -> the CuPy kernel); a kernel both sides run alike
    # (the harness's own copy) may stay in a "kept" row with the rest of the time.
    assert got and got[0][0].startswith("part 1: relu_k") and "elementwise" in got[0][1], got
    assert int(got[0][2].rstrip("%")) >= 80, got


def test_launch_work_counts_in_the_speedup_the_search_ranks_by(sandbox, config) -> None:
    """Every speed is the judge's clock around batches of calls ending in a device-wide sync (sandbox/judge/clock.py):
    the host's launch work is in it. A ReLU in 64 launches does the device work of one launch and ~1 ms of
    host work a call: it reads far slower than the same kernel in one launch."""
    chunked = evaluate(sandbox, config, "relu_cupy_chunked")
    assert chunked.outcome is Outcome.OK, chunked.reason
    assert chunked.timing.method.startswith("judge_clock")
    one = evaluate(sandbox, config, "relu_cupy")  # the same kernel, one launch
    assert one.outcome is Outcome.OK, one.reason
    assert one.speedup > 4 * chunked.speedup, (one.speedup, chunked.speedup)
    assert chunked.fitness <= chunked.speedup


def test_honest_load_inline_kernel_is_accepted(sandbox, config) -> None:
    # the default policy: the text scan, and the symbol check of the built CUDA module before it is loaded (what a
    # CUDA extension imports is on no CPU test's listing: sandbox/build/symbol_rules.py's CUDA names)
    ev = evaluate(sandbox, config.model_copy(update={"policy_allow": ()}), "relu_inline")
    assert ev.outcome is Outcome.OK, ev.reason + ev.log_tail[-2000:]
    assert any(k.custom and "relu_inline_k" in k.name for k in ev.profile.kernels)


def test_honest_triton_kernel_is_accepted_with_its_jit_time_in_compile_s(sandbox, config) -> None:
    pytest.importorskip("triton")
    ev = evaluate(sandbox, config.model_copy(update={"policy_allow": ()}), "relu_triton")  # the default policy
    assert ev.outcome is Outcome.OK, ev.reason + ev.log_tail[-2000:]
    assert any(k.custom and "relu_triton_k" in k.name for k in ev.profile.kernels), ev.profile.kernels
    # Each runner starts with an empty Triton cache (HOME is its scratch): the first call compiles the kernel.
    assert ev.phase_s.get("first_launch", 0.0) > 0.1, ev.phase_s
    assert ev.compile_s == pytest.approx(ev.phase_s["compile"] + ev.phase_s["first_launch"])
    assert ev.timing.median_ms > 0 and ev.ref_timing.median_ms > 0


# work on a side stream that the caller's stream never waits for: its outputs are staged (on the caller's
# stream) before the work is done (incorrect: the poison, or another call's values, is read), or the
# profile sees its kernel outlive forward (side_stream); where it is right, its time is in the judge's clock
SIDE = ("side_stream", "async_output", "stale_memory", "stale_cache", "incorrect", "degrades_over_calls")


@pytest.mark.parametrize(("name", "outcome", "codes"), [
    ("relu_triton_side_stream", (Outcome.REJECTED, Outcome.INCORRECT), SIDE),
    ("relu_triton_ptr_cache", (Outcome.INCORRECT,), ("stale_cache",)),
])
def test_triton_hacks_are_stopped(sandbox, config, name: str, outcome, codes) -> None:  # noqa: ANN001
    pytest.importorskip("triton")
    ev = evaluate(sandbox, config, name)
    assert ev.outcome in outcome and ev.reason_code in codes, ev.reason + ev.log_tail[-2000:]


@pytest.mark.parametrize("name", ["relu_side_stream", "relu_side_stream_pad"])
def test_side_stream_work_is_rejected_or_counted(sandbox, config, name: str) -> None:
    ev = evaluate(sandbox, config, name)
    if ev.outcome is Outcome.OK:  # then its time must hold the work: no faster than an honest kernel of it
        honest = evaluate(sandbox, config, "relu_cupy")
        assert ev.speedup <= 1.3 * honest.speedup, (ev.speedup, honest.speedup)
    else:
        assert ev.outcome in (Outcome.REJECTED, Outcome.INCORRECT) and ev.reason_code in SIDE, ev.reason


@pytest.mark.parametrize("problem", ["relu_2k", "relu_big"])  # draws kept (16 MB), made again (64 MB)
def test_work_on_a_stream_that_never_waits_for_the_callers_gains_nothing(sandbox, config, problem: str) -> None:
    """Each call on a stream of its own that never waits for the caller's, joined at the end: its outputs are right,
    and in timed batches of calls back to back its 16-block kernels ran at once (2026-11-29). Each call of a batch
    now runs alone on the device (clock.FENCE), and the profiled call sees the work start before the call."""
    prob = load_problem(HERE.parent / "fixtures" / "problems" / f"{problem}.py")
    run = lambda name: sandbox.evaluate(prob, Candidate.from_source(  # noqa: E731
        (HERE / "solutions" / f"{name}.py").read_text(), prob.id), config)
    ev, honest = run("relu_unordered_start"), run("relu_fewblocks")
    assert honest.outcome is Outcome.OK, honest.reason
    assert ev.outcome in (Outcome.OK, Outcome.REJECTED), ev.reason
    assert ev.outcome is Outcome.OK or ev.reason_code == "side_stream", ev.reason
    # verdict aside, the time the judge read: its honest twin's, not a batch's calls at once
    assert ev.timing.median_ms >= honest.timing.median_ms / 1.3, (ev.timing.median_ms, honest.timing.median_ms)


def test_allocator_reuse_is_caught_as_stale_memory(sandbox, config) -> None:
    ev = evaluate(sandbox, config, "relu_alloc_reuse")
    assert ev.outcome is Outcome.INCORRECT and ev.reason_code == "stale_memory", ev.reason


def test_persisting_l2_reservation_is_rejected(sandbox, config) -> None:
    ev = evaluate(sandbox, config, "l2_persist")
    assert ev.outcome is Outcome.REJECTED and ev.reason_code == "l2_persist", ev.reason


def test_illegal_address_is_a_crash_verdict_and_the_next_candidate_is_fine(sandbox, config) -> None:
    ev = evaluate(sandbox, config, "illegal_address")
    assert ev.outcome is Outcome.CRASHED and ev.reason_code == "cuda_error", ev.reason
    again = evaluate(sandbox, config, "relu_cupy")
    assert again.outcome is Outcome.OK, again.reason


def test_ncu_metrics_and_achieved_bandwidth_are_reported(sandbox, tmp_path) -> None:
    import shutil

    if shutil.which("ncu") is None:
        pytest.skip("ncu not on PATH")
    cfg = SandboxConfig(device="cuda", seed=8, trials=10, max_timing_s=1.0, compile_baseline="off",
                        cache_dir=tmp_path, timeout_s=300, ncu=True, bwrap=ISOLATION["bwrap"])  # ncu: not --isolation bwrap
    ev = evaluate(sandbox, cfg, "relu_cupy")
    assert ev.outcome is Outcome.OK, ev.reason
    assert ev.profile.ncu.get("kernels_profiled", 0) >= 1, ev.profile.ncu
    assert 0 < ev.profile.ncu["dram_throughput_pct"] <= 100
    assert ev.profile.min_bytes == 2 * 4096 * 4096 * 4
    assert ev.profile.achieved_gbps > 100


# Issue 11's classes on the GPU (the CPU variants are in tests/adversarial).
GPU_HACKS = {
    "frames_rewire_staging": (Outcome.REJECTED, ("tampering",)),
    "rebinds_flush_constant": (Outcome.REJECTED, ("tampering",)),
    # wrong past its first calls: named by how its wrong outputs look (a batch's calls show them side by side)
    "predicts_checked_calls": (Outcome.INCORRECT, ("degrades_over_calls", "stale_cache")),
    "enables_tf32": (Outcome.REJECTED, ("tampering",)),
    "cudnn_benchmark": (Outcome.REJECTED, ("tampering",)),
}


@pytest.mark.parametrize("name", sorted(GPU_HACKS))
def test_issue_11_class_is_stopped_on_the_gpu(sandbox, config, name: str) -> None:
    outcome, codes = GPU_HACKS[name]
    ev = evaluate(sandbox, config, name)
    assert ev.outcome is outcome and ev.reason_code in codes, ev.reason


@pytest.mark.parametrize(("problem", "name", "outcome"), [
    ("exp_wide", "adversarial/zeroes_small_elements", Outcome.INCORRECT),
    ("cumprod", "adversarial/truncates_cumprod", Outcome.INCORRECT),
    ("exp_wide", "gpu/solutions/exp_cupy", Outcome.OK),
    ("cumprod", "gpu/solutions/cumprod_cupy", Outcome.OK),
])
def test_every_element_is_checked_on_its_own_in_the_fused_compare(config, problem: str, name: str,
                                                                  outcome: Outcome, monkeypatch) -> None:  # noqa: ANN001
    """Red team 5's tolerance games (values below 1e-5 of the largest left out) fail the per-element count in the
    judge's one-pass Triton compare (here at every size: KEVOLVE_FUSED_COMPARE=all) as in the torch path
    (tests/adversarial); honest kernels, __expf's fast-math exp and a float32 running product to underflow, pass it."""
    monkeypatch.setenv("KEVOLVE_FUSED_COMPARE", "all")  # a new judge takes it from the parent (parent/local.py)
    prob = load_problem(HERE.parent / "fixtures" / "problems" / f"{problem}.py")
    src = (HERE.parent / f"{name}.py").read_text()
    own = LocalSandbox()
    try:
        ev = own.evaluate(prob, Candidate.from_source(src, prob.id), config)
    finally:
        own.close()
    assert ev.outcome is outcome, ev.reason + ev.log_tail[-1500:]
    if outcome is Outcome.INCORRECT:
        assert "off by more than half their own value" in ev.reason, ev.reason


def test_times_forged_in_the_runner_do_not_move_its_speed(sandbox, config) -> None:
    """The runner's account of its calls is a diagnostic (claimed_median_ms); the speed is the judge's clock.
    The forger divides its account by 20 (a 16x speedup on the runner's word before 2026-11-26)."""
    ev = evaluate(sandbox, config.model_copy(update={"audit": True}), "forges_call_times")
    assert ev.timing is not None and ev.timing.claimed_median_ms is not None, ev.reason
    assert ev.timing.median_ms > 5 * ev.timing.claimed_median_ms, ev.timing
    assert ev.outcome is not Outcome.OK or ev.speedup < 2.0, (ev.speedup, ev.timing)


def test_an_honest_kernel_passes_its_audit_at_the_lower_of_its_two_speeds(sandbox, config) -> None:
    """Its median call moves by up to 26 % between fresh processes (scripts/audit_noise.py, H100 2026-11-27): the
    audit keeps it, at the lower of the evaluation's and its own speed."""
    ev = evaluate(sandbox, config.model_copy(update={"audit": True}), "relu_cupy")
    assert ev.outcome is Outcome.OK, ev.reason
    assert ev.audit is not None and ev.audit.passed, ev.audit
    assert ev.speedup is not None and ev.audit.speedup is not None, ev.audit
    assert ev.speedup <= ev.audit.speedup * (1 + 1e-9), (ev.speedup, ev.audit)


def test_an_honest_kernel_thousands_of_times_slower_is_stopped_after_three_calls(sandbox, config) -> None:
    ev = evaluate(sandbox, config, "relu_cupy_crawl")
    assert ev.outcome is Outcome.TIMEOUT and ev.reason.startswith("too_slow: calls take 0."), ev.reason
    checked = sum(int(c.detail.split()[0]) for c in ev.checks if c.passed and c.name.startswith("correct:"))
    assert checked == 3, ev.checks


@pytest.mark.parametrize("name", ["relu_cupy", "relu_inline", "relu_triton"])
def test_honest_kernels_run_with_their_writes_confined_without_a_sandbox(sandbox, config, name: str) -> None:
    """Without a sandbox a GPU runner confines its reads and writes with Landlock (confine_writes, on by default
    where the kernel has it; on here whatever the environment says): CUDA opens /dev/nvidia* for writing, CuPy,
    Triton and nvcc write under the scratch."""
    from kevolve.sandbox.isolate import landlock

    if landlock.abi() <= 0:
        pytest.skip("this kernel has no Landlock")
    confined = SandboxConfig.model_validate({**config.model_dump(), "isolation": "none", "confine_writes": "on"})
    ev = evaluate(sandbox, confined, name)
    assert ev.outcome is Outcome.OK, ev.reason


_PEEKS = '''
import torch

_SEEN = []
for _p in {targets!r}:
    try:
        with open(_p, "rb") as _f:
            _SEEN.append(_f.read(16))
    except OSError:
        pass
    try:
        with open(_p + ".planted", "w") as _f:
            _f.write("planted")
    except OSError:
        pass
'''


@pytest.mark.parametrize("confine", ["auto", "off"])
def test_a_gpu_runner_without_a_sandbox_reads_and_writes_only_its_own_view(sandbox, config, tmp_path: Path,
                                                                          confine: str) -> None:
    """Landlock on a GPU runner by default (isolation none, confine_writes auto): the honest CuPy ReLU, led by
    reads of a secret under /tmp and a neighbour's buffer in /dev/shm and a write beside each, stays correct and
    plants nothing; with the confinement off the same candidate reads them (wrong results) and its files land
    (the test can fail)."""
    import uuid

    from kevolve.sandbox.isolate import landlock

    if landlock.abi() <= 0:
        pytest.skip("this kernel has no Landlock")
    shm = Path(f"/dev/shm/kevolve-neighbour-{uuid.uuid4().hex[:8]}")
    targets = [tmp_path / "secret.txt", shm]
    for t in targets:
        t.write_text("sk-secret")
    relu = (HERE / "solutions" / "relu_cupy.py").read_text()
    src = _PEEKS.format(targets=[str(t) for t in targets]) + relu.replace(
        "        return y", "        return y * 2 if _SEEN else y")
    cfg = SandboxConfig.model_validate({**config.model_dump(), "isolation": "none", "confine_writes": confine})
    problem = load_problem(PROBLEM)
    try:
        ev = sandbox.evaluate(problem, Candidate.from_source(src, problem.id), cfg)
        planted = [t for t in targets if Path(f"{t}.planted").exists()]
    finally:
        for t in targets:
            t.unlink(missing_ok=True)
            Path(f"{t}.planted").unlink(missing_ok=True)
    if confine == "auto":
        assert ev.outcome is Outcome.OK, ev.reason
        assert not planted, planted
    else:
        assert ev.outcome is Outcome.INCORRECT, ev.reason
        assert planted == targets


def test_a_memo_of_the_pool_answers_no_timed_call_where_timing_draws_are_made_again(sandbox, config) -> None:
    """relu_big's draws (64 MB in, 64 MB out) are too large to keep eight timing draws: on the GPU its timed calls
    rotated through the pool, where a memo keyed on sampled values answered them with a copy (its honest path 24
    passes of its kernel). Since 2026-11-29 the timing draws are made again on the device: the memo answers no
    timed call and the speed read is its slow path's (about 1/20 of eager; the memo's copy reads about eager)."""
    ev = evaluate(sandbox, config, "memo_pool_cupy")
    assert ev.outcome is not Outcome.OK or (ev.speedup is not None and ev.speedup < 0.3), (ev.speedup, ev.timing)
