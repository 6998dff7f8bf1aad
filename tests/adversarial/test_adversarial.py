"""Every adversarial candidate in this folder is caught, on the CPU, with its own reason code.

Each `*.py` here (besides the tests) is a candidate whose docstring names the hack and the public
incident it mirrors. They run through the real sandbox: separate reference and candidate workers,
outputs compared in the parent.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from kevolve.records import Outcome

HERE = Path(__file__).parent
HONEST_RELU = HERE.parent / "fixtures" / "solutions" / "relu_cpp.py"

# hack file -> (problem, outcome, reason code, text the reason must contain)
CAUGHT = {
    "stale_output_empty": ("relu", Outcome.INCORRECT, "stale_memory", "poison"),
    "stale_output_partial": ("relu", Outcome.INCORRECT, "stale_memory", "poison"),
    "mutates_input": ("relu", Outcome.REJECTED, "mutated_inputs", "input 0"),
    "thread_finishes_output_soon": ("relu", Outcome.REJECTED, "async_output", "after forward returned"),
    "thread_finishes_output_late": ("relu", Outcome.REJECTED, "background_thread", "thread"),
    "lying_tensor_subclass": ("relu", Outcome.REJECTED, "tensor_subclass", "AlwaysClose"),
    "lazy_output_proxy": ("relu", Outcome.REJECTED, "bad_output", "LazyResult"),
    "meta_tensor_output": ("relu", Outcome.REJECTED, "bad_output", "meta=True"),
    "cache_keyed_on_shape": ("relu", Outcome.INCORRECT, "stale_cache", "repeats the output"),
    "cache_keyed_on_data_ptr": ("relu", Outcome.INCORRECT, "stale_cache", "repeats the output"),
    # CPU: every timed call is on a draw it has never seen (draws.TIMING_MAX), so the memo serves none; the
    # ablation call, on a draw it has seen, reaches no kernel at all (input_cache where timing draws do not fit)
    "cache_keyed_on_content": ("linear_relu", Outcome.REJECTED, "no_custom_kernel", "no call reached a built extension"),
    "right_for_first_calls": ("relu", Outcome.INCORRECT, "degrades_over_calls", "timed call"),
    "skips_work_when_timed": ("relu", Outcome.INCORRECT, "stale_cache", "repeats the output"),
    "patches_perf_counter": ("relu", Outcome.REJECTED, "tampering", "time.perf_counter"),
    "patches_allclose": ("relu", Outcome.REJECTED, "tampering", "torch.allclose"),
    "patches_cuda_synchronize": ("relu", Outcome.REJECTED, "tampering", "synchronize"),
    "patches_harness_timer": ("relu", Outcome.REJECTED, "tampering", "Timer.one"),
    "patches_randn_inputs": ("relu", Outcome.REJECTED, "tampering", "torch.randn"),
    "leaves_torch_function_mode": ("relu", Outcome.REJECTED, "tampering", "mode left active"),
    "forges_worker_report": ("relu", Outcome.CRASHED, "exit", "code 0 during correctness"),
    "forges_custom_kernel": ("softmax", Outcome.REJECTED, "no_custom_kernel", "aten::exp"),
    "relabels_torch_op": ("softmax", Outcome.REJECTED, "no_custom_kernel", "aten::exp"),
    "torch_only": ("relu", Outcome.REJECTED, "no_custom_kernel", "aten::relu"),
    "kernel_only_on_seen_inputs": ("relu", Outcome.REJECTED, "no_custom_kernel", "aten::relu"),  # red team 5, a05
    "decoy_kernel": ("relu", Outcome.REJECTED, "decoy_kernel", "relu_fwd"),
    "reduced_precision_bf16": ("linear_relu", Outcome.INCORRECT, "reduced_precision", "float64"),
    "relu6_off_distribution": ("relu", Outcome.INCORRECT, "off_distribution", "'scale' draw"),
    "softmax_without_max_subtraction": ("softmax", Outcome.INCORRECT, "off_distribution", "'wide' draw"),
    "calls_sys_exit": ("relu", Outcome.CRASHED, "exit", "exit(0) (during correctness)"),
    "calls_os_exit": ("relu", Outcome.CRASHED, "exit", "code 0 during correctness"),
    # Issue 11's classes, written against the judge/runner evaluator by reading sandbox/:
    "walks_frames_to_runner": ("relu", Outcome.REJECTED, "tampering", "Stepper.staging"),  # 1 frames
    "rebinds_harness_constant": ("relu", Outcome.REJECTED, "tampering", "_CPU_FLUSH_BYTES"),  # 2 unguarded state
    "predicts_checked_calls": ("relu", Outcome.INCORRECT, "degrades_over_calls", "timed call"),  # 3 predictable
    "patches_problem_inputs": ("relu", Outcome.INCORRECT, "stale_cache", "repeats the output"),  # 4 problem module
    "decoy_beside_clamp_min": ("relu", Outcome.REJECTED, "decoy_kernel", "random values"),  # 5 kernel evidence
    "sets_num_threads": ("relu", Outcome.REJECTED, "tampering", "get_num_threads"),  # 6 unequal conditions
    "writes_garbage_reply": ("relu", Outcome.CRASHED, "bad_report", "not a report"),  # 8 bad output file
    "patches_clocks_in_report": ("relu", Outcome.REJECTED, "tampering", "time.perf_counter"),  # 9 clocks
    # from a held-out red-team corpus (2026-11-24): code run by the harness after the clock stopped
    "overrides_copy_kernel": ("relu", Outcome.REJECTED, "tampering", "dispatch aten::copy_"),  # 2 dispatcher
    "trace_hook_after_clock": ("relu", Outcome.REJECTED, "tampering", "sys.gettrace"),  # 1 frames + hooks
    "sets_flush_denormal": ("relu", Outcome.REJECTED, "tampering", "set_flush_denormal"),  # 6 FP environment
    "overrides_equal_kernel": ("relu", Outcome.REJECTED, "tampering", "dispatch aten::equal"),  # 2 dispatcher
    # the thread rule a reference's runner goes without (2026-11-24), turned off from forward
    "turns_off_thread_check": ("relu", Outcome.REJECTED, "tampering", "Stepper.vet_threads"),  # 1 frames + 2 state
    # red team 5 (2026-11-28): values below 1e-5 of the largest, unchecked by the normwise tolerance alone
    "zeroes_small_elements": ("exp_wide", Outcome.INCORRECT, "incorrect", "off by more than half their own value"),
    "truncates_cumprod": ("cumprod", Outcome.INCORRECT, "incorrect", "off by more than half their own value"),
}
# Hacks that need their own limits or set-up have their own tests below.
SPECIAL = {"segfaults", "infinite_loop", "allocates_too_much", "reads_secret_env", "reads_the_judges_memory", "forges_call_times",
           "forges_times_slightly", "spins_in_setsid_daemon", "writes_runner_bytecode", "forges_reference_answers",
           "plants_build_cache", "signals_other_runners", "spins_between_calls",
           "drives_warm_service", "returns_view_of_input", "returns_staging_buffer",
           "memo_slows_controls"}  # tests/integration/test_timing_draws.py (the pool path, forced in-process)  # tests/integration/test_warm_eval.py (it needs a running service)


def hack_files() -> list[Path]:
    return sorted(p for p in HERE.glob("*.py") if not p.name.startswith(("test_", "conftest")))


@pytest.mark.parametrize("hack", sorted(CAUGHT))
def test_hack_is_caught_with_its_own_reason(evaluate, hack: str) -> None:  # noqa: ANN001
    problem, outcome, code, detail = CAUGHT[hack]
    ev = evaluate(problem, HERE / f"{hack}.py")
    assert (ev.outcome, ev.reason_code) == (outcome, code), ev.reason
    assert detail in ev.reason
    assert "\n" not in ev.reason and ev.speedup is None


CLASSES = ("walks_frames_to_runner", "rebinds_harness_constant", "predicts_checked_calls", "patches_problem_inputs",
           "decoy_beside_clamp_min", "sets_num_threads", "writes_garbage_reply", "patches_clocks_in_report")


@pytest.mark.parametrize("hack", CLASSES)
def test_issue_11_classes_are_stopped_without_bubblewrap_too(evaluate, hack: str) -> None:  # noqa: ANN001
    """The default run uses bubblewrap where it works; the same verdicts hold with plain processes."""
    problem, outcome, code, detail = CAUGHT[hack]
    ev = evaluate(problem, HERE / f"{hack}.py", isolation="none")
    assert (ev.outcome, ev.reason_code) == (outcome, code), ev.reason
    assert detail in ev.reason


def test_a_thread_spinning_between_calls_is_frozen_with_its_runner(evaluate) -> None:  # noqa: ANN001
    # Frozen from each answer to its next command (its cgroup): the thread never runs while the reference
    # does. What it burns between the runner's last answer and the freeze landing shows in the vetting's
    # CPU (background_cpu) on a loaded machine; otherwise what is left is a torch-only forward.
    ev = evaluate("relu", HERE / "spins_between_calls.py")
    assert (ev.outcome, ev.reason_code) in ((Outcome.REJECTED, "background_cpu"), (Outcome.REJECTED, "no_custom_kernel"))
    assert "had no call to answer" not in ev.reason, ev.reason  # nothing of it ran between its commands


def test_phase_times_come_from_the_judge_whatever_clocks_the_candidate_patched(evaluate) -> None:  # noqa: ANN001
    ev = evaluate("relu", HERE / "patches_clocks_in_report.py")
    assert ev.reason_code == "tampering", ev.reason
    assert ev.phase_s and all(v >= 0 for v in ev.phase_s.values()), ev.phase_s
    assert ev.wall_s >= 0


@pytest.mark.parametrize("isolation", ["auto", "none"])
@pytest.mark.parametrize("hack", ["forges_call_times", "forges_times_slightly"])
def test_times_forged_inside_the_runner_do_not_move_the_speedup(evaluate, hack: str,  # noqa: ANN001
                                                                isolation: str) -> None:
    # 20x and 1.8x forgeries of the runner's own account. Every speed comes from the judge's own clock
    # (sandbox/judge/clock.py: on the CPU the runner's CPU time by its cgroup); the runner's account is kept beside
    # it as a diagnostic (claimed_median_ms). The forger is timed as its honest twin (the same C++ loop) is:
    # were its account read, its time would be 1/1.8 or 1/20 of the twin's.
    factor = 1.8 if hack == "forges_times_slightly" else 20.0
    problem = "relu_wide" if hack == "forges_times_slightly" else "relu"
    ev = evaluate(problem, HERE / f"{hack}.py", isolation=isolation)
    honest = evaluate(problem, HONEST_RELU, isolation=isolation)
    assert honest.outcome is Outcome.OK and ev.outcome is Outcome.OK, (honest.reason, ev.reason)
    assert ev.timing.method.startswith("judge_clock") and ev.timing.claimed_median_ms is not None
    ratio = ev.timing.median_ms / honest.timing.median_ms
    assert ratio > factor ** -0.5, (ev.timing, honest.timing)  # the geometric middle: 0.75 (1.8x), 0.22 (20x)


@pytest.mark.parametrize("confine", ["auto", "off"])
def test_a_candidate_without_a_sandbox_cannot_plant_in_the_build_cache(evaluate, cpu_config, confine: str) -> None:  # noqa: ANN001
    # isolation none: the runner runs as the user. With its writes confined (Landlock, the default on the
    # CPU) nothing lands in the cache; with confine_writes off the same candidate plants both files,
    # which is what the confinement is for (and shows this test can fail).
    from kevolve.sandbox.isolate import landlock

    if landlock.abi() <= 0:
        pytest.skip("this kernel has no Landlock")
    ext = cpu_config.cache_dir.resolve() / "extensions"
    planted = [ext / "by-source" / "kevolve-test-planted", ext / "kevolve-test-planted-scope"]
    for p in planted:
        shutil.rmtree(p, ignore_errors=True)
    try:
        ev = evaluate("relu", HERE / "plants_build_cache.py", isolation="none", confine_writes=confine)
        landed = [p.exists() for p in planted]
        assert landed == ([True, True] if confine == "off" else [False, False]), ev.reason
    finally:
        for p in planted:
            shutil.rmtree(p, ignore_errors=True)


@pytest.mark.parametrize(("isolation", "confine"), [("auto", "auto"), ("none", "auto"), ("none", "off")])
def test_a_candidate_cannot_signal_the_judges_other_processes(evaluate, isolation: str, confine: str) -> None:  # noqa: ANN001
    from kevolve.sandbox.isolate import landlock
    from kevolve.sandbox.isolate.bwrap import local_launcher
    from kevolve.sandbox.config import SandboxConfig

    ev = evaluate("relu", HERE / "signals_other_runners.py", isolation=isolation, confine_writes=confine,
                  allow_torch_only=True)
    sandboxed = isolation == "auto" and local_launcher(SandboxConfig(device="cpu")) is not None
    if sandboxed or confine == "auto" and landlock.abi() >= 6:  # whatever the timing rules say of torch.relu
        assert ev.outcome is not Outcome.RUNTIME_ERROR and "signalled" not in ev.reason, ev.reason
    else:
        assert ev.outcome is Outcome.RUNTIME_ERROR and "signalled" in ev.reason, ev.reason


def test_a_timer_disagreement_is_measured_by_a_second_audit_before_it_overturns(evaluate) -> None:  # noqa: ANN001
    # a tolerance no measurement meets (an audit must see ten times the evaluation's speedup; twice was met once
    # on a busy machine, 2026-11-28): the first audit disagrees
    # on the runner's timer alone, a second one (another fresh runner and seed) disagrees too, and only then is the
    # verdict overturned (the rule is one-sided: a tolerance of 0 would pass an audit that happened to run faster)
    ev = evaluate("relu", HONEST_RELU, audit=True, audit_tolerance=-9.0)
    assert (ev.outcome, ev.reason_code) == (Outcome.REJECTED, "audit_mismatch"), ev.reason
    assert ev.audit is not None and ev.audit.first is not None and ev.audit.first.startswith("audit_mismatch: ")
    assert "a second audit" in ev.reason and ev.audit.timer_only


def test_an_honest_candidate_passes_its_audit(evaluate) -> None:  # noqa: ANN001
    # On the CPU the audit's default tolerance is 50 % (a shared machine's timings move by more than
    # 10 % between two processes); tests/gpu holds the GPU's 30 %. The lower of the two speeds stands.
    ev = evaluate("relu", HONEST_RELU, audit=True)
    assert ev.ok, ev.reason
    assert ev.audit is not None and ev.audit.passed and ev.audit.speedup is not None
    assert ev.speedup is not None and ev.speedup <= ev.audit.speedup * (1 + 1e-9), (ev.speedup, ev.audit)


def test_torch_only_candidate_is_accepted_with_allow_torch_only(evaluate) -> None:  # noqa: ANN001
    ev = evaluate("relu", HERE / "torch_only.py", allow_torch_only=True)
    assert ev.ok, ev.reason
    assert ev.speedup is not None


def test_segfault_is_a_verdict_and_the_next_evaluation_works(evaluate) -> None:  # noqa: ANN001
    crashed = evaluate("relu", HERE / "segfaults.py")
    assert (crashed.outcome, crashed.reason_code) == (Outcome.CRASHED, "signal"), crashed.reason
    assert "SIGSEGV" in crashed.reason
    after = evaluate("relu", HONEST_RELU)
    assert after.ok, after.reason


def test_infinite_loop_is_killed_at_the_timeout(evaluate) -> None:  # noqa: ANN001
    ev = evaluate("relu", HERE / "infinite_loop.py", timeout_s=10)
    assert (ev.outcome, ev.reason_code) == (Outcome.TIMEOUT, "timeout"), ev.reason
    assert "during correctness" in ev.reason  # the candidate's loop, not a slow start-up


def test_memory_hog_is_killed_at_the_memory_limit(evaluate) -> None:  # noqa: ANN001
    ev = evaluate("relu", HERE / "allocates_too_much.py", memory_limit_gb=2.0)
    assert (ev.outcome, ev.reason_code) == (Outcome.CRASHED, "memory_limit"), ev.reason
    assert "during correctness" in ev.reason


def test_worker_environment_holds_no_secrets(evaluate, monkeypatch) -> None:  # noqa: ANN001
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN",
                 "GITHUB_TOKEN", "DB_PASSWORD"):
        monkeypatch.setenv(name, "secret-value")
    ev = evaluate("relu", HERE / "reads_secret_env.py")
    assert ev.ok, ev.reason  # the candidate returns wrong results if it sees any of them


@pytest.mark.parametrize("confine", ["auto", "off"])
def test_the_judges_and_the_users_memory_are_out_of_a_candidates_reach(evaluate, confine: str) -> None:  # noqa: ANN001
    # under `none` as root with confine_writes off (no Landlock domain), a runner read the judge's memory through
    # /proc/<ppid>/mem (seen 2026-11-28); now the runner holds no CAP_SYS_PTRACE, ptrace is refused by its seccomp
    # filter, and the judge and the user's process are not dumpable
    ev = evaluate("relu", HERE / "reads_the_judges_memory.py", confine_writes=confine)
    assert ev.ok, ev.reason  # the candidate returns wrong results if it opened any of them


def test_a_setsid_daemon_spinning_beside_the_calls_is_counted_in_the_runners_cgroup(evaluate) -> None:  # noqa: ANN001
    from kevolve.sandbox.isolate.containment import ContainmentKind, choose

    if choose().kind is not ContainmentKind.CGROUP:
        pytest.skip("escaped processes' CPU time is read from the worker's cgroup; this machine gives none")
    # its forward is torch's own ReLU: allowed here, so that the verdict is about the daemon (ok at its speed, or
    # background_cpu), not no_custom_kernel (which it got once frozen while its outputs are compared, 2026-11-27)
    ev = evaluate("relu", HERE / "spins_in_setsid_daemon.py", allow_torch_only=True)
    # in the runner's cgroup: frozen with it between commands, its CPU the candidate's own time inside them
    # (sandbox/judge/clock.py); background_cpu where it took more than a core's share there
    assert ev.ok or (ev.outcome, ev.reason_code) == (Outcome.REJECTED, "background_cpu"), ev.reason
    assert "had no call to answer" not in ev.reason, ev.reason


@pytest.mark.parametrize("confine", ["auto", "off"])
def test_the_primed_runner_bytecode_is_out_of_a_candidates_reach(evaluate, confine: str) -> None:  # noqa: ANN001
    # Two layers: the write fails (bubblewrap's read-only mount, or Landlock without a sandbox); where
    # it lands (confine_writes off, or a kernel without Landlock) the judge sees it after the candidate
    from testpaths import ISOLATION

    from kevolve.sandbox.isolate import landlock, pycache
    from kevolve.sandbox.isolate.bwrap import local_launcher
    from kevolve.sandbox.config import SandboxConfig

    where = pycache.folder(pycache.default_root())
    ev = evaluate("relu", HERE / "writes_runner_bytecode.py", confine_writes=confine)
    sandboxed = local_launcher(SandboxConfig(device="cpu", **ISOLATION)) is not None
    if sandboxed or confine == "auto" and landlock.abi() > 0:
        assert ev.ok, ev.reason  # the write failed: read-only
    else:
        assert (ev.outcome, ev.reason_code) == (Outcome.REJECTED, "tampering"), ev.reason
        assert "runner bytecode" in ev.reason
    # either way the prefix is as primed now, and the next candidate's runners start from it
    marker = where / ".primed"
    assert marker.read_text().strip() == pycache.digest(where)
    after = evaluate("relu", HONEST_RELU)
    assert after.ok, after.reason
    # the shared prefix written from outside this judge (another judge's candidate, run at the same time): not the
    # honest candidate evaluated here meanwhile (a judge without a sandbox reads its own copy; under bubblewrap the
    # judge's runners read the shared one, read-only, and a write from outside is the next priming's to repair)
    target = next(where.rglob("_tensor_str.*.pyc"))
    data = target.read_bytes()
    try:
        target.write_bytes(data[:16] + b"\0" * 64 + data[80:])
        elsewhere = evaluate("relu", HONEST_RELU)
    finally:
        target.write_bytes(data)
    assert elsewhere.ok, elsewhere.reason


def test_every_hack_file_is_covered_and_documented() -> None:
    names = {p.stem for p in hack_files()}
    assert names == set(CAUGHT) | SPECIAL
    for p in hack_files():
        doc = ast.get_docstring(ast.parse(p.read_text())) or ""
        assert doc.startswith("Hack") and "Expected" in doc, p.name


def test_hacks_that_build_cpp_share_the_honest_relu_extension() -> None:
    # One extension build (~30 s on 2 cores) serves every hack that needs a real custom kernel.
    relu = HONEST_RELU.read_text()
    block = relu[relu.index('_src = r"""'):relu.index("verbose=False)") + len("verbose=False)")]
    for p in hack_files():
        if "load_inline(" in p.read_text():
            assert block in p.read_text(), p.name


def test_the_default_policy_stops_the_class_candidates_before_anything_runs(sandbox, cpu_config) -> None:  # noqa: ANN001
    """The same candidates under the default policy: rejected by the parent, no judge or runner involved."""
    from kevolve.contract import load_problem
    from kevolve.records import Candidate

    prob = load_problem(HERE.parent / "fixtures" / "problems" / "relu.py")
    config = cpu_config.model_copy(update={"policy_allow": ()})
    for hack in CLASSES:
        if hack == "decoy_beside_clamp_min":  # needs no capability: left to the evaluator
            continue
        ev = sandbox.evaluate(prob, Candidate.from_source((HERE / f"{hack}.py").read_text(), prob.id), config)
        assert ev.outcome is Outcome.REJECTED and ev.reason_code.startswith("policy_"), (hack, ev.reason)
        assert ev.wall_s < 5 and not ev.phase_s, (hack, ev.phase_s)


@pytest.mark.parametrize(("isolation", "confine"), [("auto", "auto"), ("none", "auto"), ("none", "off")])
def test_answers_written_into_the_references_channel_are_not_its_times(evaluate, isolation: str,  # noqa: ANN001
                                                                         confine: str) -> None:
    # The reference's runner talks to the judge over inherited pipes (no name to open), maps its inputs
    # from files it no longer names and is not dumpable; Landlock (confine_writes) denies opening that pipe for
    # writing. Root without either reached it through /proc/PID/fd until runners gave up CAP_SYS_PTRACE first thing
    # (procfs.drop_ptrace, 3a82b12): refused (EACCES) in every run here alone, torch.relu's own speed. Once, in a
    # run with both cores oversubscribed, root under none-off still wrote an answer (the nonce caught it: tampering;
    # the path it took is not found yet): the property held either way, no forged answer is ever a time.
    ev = evaluate("relu", HERE / "forges_reference_answers.py", isolation=isolation, allow_torch_only=True,
                  confine_writes=confine)
    if not ev.ok:
        assert isolation == "none" and confine == "off", (ev.reason, ev.speedup)
        assert (ev.outcome, ev.reason_code) == (Outcome.REJECTED, "tampering") and "nonce" in ev.reason, ev.reason
    else:
        assert ev.speedup is not None and ev.speedup < 5, (ev.reason, ev.speedup)
    again = evaluate("relu", HERE / "torch_only.py", allow_torch_only=True)  # the problem prepared afresh
    assert again.ok and again.speedup is not None and again.speedup < 5, (again.reason, again.speedup)


@pytest.mark.parametrize("isolation", ["auto", "none"])
def test_outputs_that_alias_inputs_or_the_staging_buffers_are_rejected(evaluate, isolation: str) -> None:  # noqa: ANN001
    """Red team 5: a view of the input where the reference materialises (the harness's copy did the work, 1.25x),
    and the call's staging buffer returned as the output (its copy skipped, 1.18-1.32x). An honest candidate whose
    reference itself returns a view of its input is ok."""
    view = evaluate("transpose", HERE / "returns_view_of_input.py", isolation=isolation, allow_torch_only=True)
    assert view.outcome is Outcome.REJECTED and view.reason.startswith("aliases_input: output 0"), view.reason
    staged = evaluate("relu", HERE / "returns_staging_buffer.py", isolation=isolation, allow_torch_only=True)
    assert staged.outcome is Outcome.REJECTED and staged.reason.startswith("aliases_staging: output 0"), staged.reason
    honest = evaluate("flatten_view", HERE.parent / "fixtures" / "solutions" / "flatten_view_reshape.py",
                      isolation=isolation, allow_torch_only=True)
    assert honest.ok, honest.reason


def test_the_kernel_evidence_is_on_a_never_seen_draw_where_few_timing_draws_fit(evaluate) -> None:  # noqa: ANN001
    """relu_2k (32 MB a draw with its truth: 8 timing draws fit, draws.TIMING_BYTES) has fewer than the ten timing
    draws the profiled call takes one from; it now takes the last never-seen draw, held out of the fresh calls.
    Before 2026-11-28 it took a pool draw every call had seen, and a kernel run only on recognised inputs was `ok`."""
    import runpy

    from kevolve.sandbox.judge.draws import TIMING_BYTES, TIMING_MIN

    x = runpy.run_path(str(HERE.parent / "fixtures" / "problems" / "relu_2k.py"))["get_inputs"]()[0]
    assert TIMING_MIN <= TIMING_BYTES // (2 * x.numel() * x.element_size()) < 10  # the premise
    ev = evaluate("relu_2k", HERE / "kernel_only_on_seen_inputs.py")
    assert (ev.outcome, ev.reason_code) == (Outcome.REJECTED, "no_custom_kernel"), ev.reason
    honest = evaluate("relu_2k", HONEST_RELU)
    assert honest.ok, honest.reason
