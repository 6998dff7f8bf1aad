"""Turn what a judge's session established into one Evaluation (runs in the judge, trusted).

Order: how the session stopped (the runner's own failure, a failed check, the runner gone) →
the runner's final account (tampering, changed settings, persisting L2) → rules over the times
(never-seen inputs, side streams) → custom-kernel evidence → ok. Phase times are the judge's own
clock, never a number the runner reported.
"""

from __future__ import annotations

import re
import signal
import statistics
import time
from collections import Counter

from kevolve.records import Candidate, CheckResult, Evaluation, Outcome, Problem, Profile
from kevolve.sandbox.judge.clock import both_sides, call_times, method
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.judge.oracle import ProblemState
from kevolve.sandbox.common.protocol import ReferenceSummary
from kevolve.sandbox.judge.runner_proc import Gone
from kevolve.sandbox.common.timing import stats
from kevolve.sandbox.judge.facts import Facts, Verdict

_STATUS = {"compile_error": Outcome.COMPILE_ERROR, "runtime_error": Outcome.RUNTIME_ERROR,
           "crashed": Outcome.CRASHED, "rejected": Outcome.REJECTED, "incorrect": Outcome.INCORRECT,
           "infra_error": Outcome.INFRA_ERROR, "timeout": Outcome.TIMEOUT}
# CPU time the candidate's runner may use in the timing phase beyond the time it spent inside calls
# (a single thread uses at most that): this share of it plus this much (/proc counts in 10 ms ticks).
_CPU_RATIO, _CPU_SLACK_S = 0.5, 0.05
# Read call by call (cgroup): CPU the candidate's runner may use while it has no call to answer (it waits
# on its pipe then), and how much more than the reference's runner it may spend vetting its calls
_IDLE_SLACK_S, _IDLE_PER_CALL_S, _VET_RATIO = 0.02, 0.0002, 2.0
# Where the timed batches rotate through the pool (no never-seen draws fit: large problems), a cache keyed
# on input content answers them from memory; never-seen inputs, timed once each by the same clock, then
# cost more than the pool's median by a margin noise does not reach.
_CACHE_RATIO, _CACHE_SLACK_MS = 1.5, 0.05
_FAMILIES = (("gemm", re.compile(r"aten::(mm|addmm|bmm|baddbmm|matmul|linear|addmv|mv|dot|_addmm_activation)$")),
             ("conv", re.compile(r"aten::(_?convolution|conv\w*|cudnn_convolution\w*|mkldnn_convolution\w*|"
                                 r"_slow_conv\w*|slow_conv\w*|thnn_conv\w*)$")))


def infra(problem: Problem, cand: Candidate, summary: ReferenceSummary, reason: str, t0: float) -> Evaluation:
    return Evaluation(candidate_id=cand.id, problem_id=problem.id, outcome=Outcome.INFRA_ERROR, reason=reason,
                      device=summary.device_name, versions=summary.versions, wall_s=time.monotonic() - t0)


def _gone_reason(g: Gone, phase: str) -> tuple[Outcome, str]:
    if g.timed_out:
        return Outcome.TIMEOUT, f"timeout: no verdict within the time limit (during {phase}); process group killed"
    if g.memory_exceeded:
        return Outcome.CRASHED, f"memory_limit: worker exceeded its host memory limit (during {phase})"
    if g.disk_exceeded:
        return Outcome.CRASHED, f"disk_limit: worker wrote more than its scratch space allows (during {phase})"
    if g.garbled:
        return Outcome.CRASHED, f"bad_report: the runner wrote something that is not a report ({g.garbled}) during {phase}"
    code = g.returncode or 0
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return Outcome.CRASHED, f"signal: worker killed by {name} during {phase}"
    return Outcome.CRASHED, f"exit: worker exited with code {code} during {phase} without a verdict"


def _stop_reason(v: Verdict, phase: str) -> tuple[Outcome, str]:
    if v.gone is not None:
        return _gone_reason(v.gone, phase)
    outcome = _STATUS.get(v.status, Outcome.CRASHED)
    reason = v.reason if ":" in v.reason.split(" ", 1)[0] else f"{v.status}: {v.reason}"
    if outcome in (Outcome.RUNTIME_ERROR, Outcome.CRASHED) and "during" not in reason:
        reason += f" (during {phase})"
    return outcome, reason


def _checks(facts: Facts) -> list[CheckResult]:
    """Every failed call listed; passing calls folded into one line per phase."""
    out = [c.check for c in facts.ledger.calls if not c.check.passed]
    by: dict[str, int] = {}
    for c in facts.ledger.calls:
        if c.check.passed:
            by[c.phase] = by.get(c.phase, 0) + 1
    out += [CheckResult(name=f"correct:{p}", passed=True, detail=f"{n} calls checked") for p, n in by.items()]
    return out


def _family(op: str) -> str:
    for name, rx in _FAMILIES:
        if rx.match(op):
            return name
    return op


def _kernel_base(name: str) -> str:
    """A kernel's name without `void`, template arguments and parameters (`gemm_p1_kernel(float …)`)."""
    return re.split(r"[(<]", name.removeprefix("void ").strip(), maxsplit=1)[0].strip()


def _as_often(ref: Profile | None, prof: Profile, families: set[str]) -> bool:
    """Whether the candidate's PyTorch ran each of the reference's compute op families at least as many times as the
    reference did: a model whose kernels replace some of its parts (a whole model composed of optimized parts) still
    runs every kind of op in the parts left to PyTorch, but fewer of them. True where a side has no counts."""
    from kevolve.sandbox.common.profile import is_compute_op

    if ref is None or not ref.op_counts or not prof.op_counts:
        return True
    counts: list[Counter[str]] = []
    for p in (ref, prof):
        c: Counter[str] = Counter()
        for op, n in p.op_counts:
            if is_compute_op(op):
                c[_family(op)] += n
        counts.append(c)
    return all(counts[1][f] >= counts[0][f] for f in families)


def custom_kernel_rule(prof: Profile | None, ref: Profile | None, config: SandboxConfig,
                       ablation_still_right: bool = False, ablated: int | None = None) -> str | None:
    """no_custom_kernel / decoy_kernel, from the profiles and the ablation call.

    Decoy, two ways: PyTorch still runs every compute op of the reference (by family: a GEMM is a
    GEMM whether `mm`, `addmm` or `matmul`) at least as many times, or the output stays right when the custom kernels'
    results are replaced by random values (they did not make it, whatever ops PyTorch ran instead).
    """
    from kevolve.sandbox.common.profile import is_compute_op

    if prof is None or config.allow_torch_only:
        return None
    ref_kernels = {_kernel_base(k.name) for k in (ref.kernels if ref else ())}
    custom = [k for k in prof.kernels if k.custom and _kernel_base(k.name) not in ref_kernels]
    used = ", ".join(sorted({o for o in prof.torch_ops if is_compute_op(o)})[:4]) or "none"
    if not custom:
        return f"no_custom_kernel: forward ran only PyTorch's own ops ({used}); pass --allow-torch-only to permit"
    if not config.is_cuda and ablated == 0:  # the profiler hook saw calls that no built extension received
        return (f"no_custom_kernel: no call reached a built extension (the profile's {custom[0].name[:40]} "
                f"was not called through it); PyTorch ran {used}")
    ref_ops = {_family(o) for o in (ref.torch_ops if ref else ()) if is_compute_op(o)}
    cand_ops = {_family(o) for o in prof.torch_ops if is_compute_op(o)}
    if ref_ops and ref_ops <= cand_ops and _as_often(ref, prof, ref_ops):
        return (f"decoy_kernel: PyTorch still runs every op of the reference ({', '.join(sorted(ref_ops)[:4])}) "
                f"as often beside the custom kernel {custom[0].name[:40]}")
    if ablation_still_right:
        return (f"decoy_kernel: the output stays right when the custom kernels' results are replaced by random "
                f"values: PyTorch's own ops ({', '.join(sorted(cand_ops)[:4]) or 'none'}) make it, not "
                f"{custom[0].name[:40]}")
    return None


def _rules(facts: Facts, summary: ReferenceSummary, config: SandboxConfig) -> str | None:
    fin = facts.final
    if fin is not None and fin.tampered:
        return f"tampering: candidate replaced {', '.join(fin.tampered[:4])}"
    if fin is not None and fin.settings_changed:
        return f"tampering: process setting changed: {fin.settings_changed[0]}"
    if fin is not None and fin.l2_raised:
        return f"l2_persist: candidate raised the persisting L2 set-aside ({fin.l2_raised})"
    if not config.is_cuda:  # before the clock: a process of its own competing with its runner slows its windows
        busy_cpu = cpu_rule(facts)
        if busy_cpu:
            return busy_cpu
    fresh = call_times(facts.fresh, facts.empty, facts.ref_empty)
    # the calls on repeated inputs: the timed ones themselves where they are single calls as the controls are (a memo
    # that slowed only the call before each never-seen one read 26x, red team 8), else the controls (GPU batches: a
    # fresh call after a flush is compared with one alike, not with calls whose draws the batch left in L2)
    single = facts.batches and all(w.calls == 1 for w in facts.batches)
    seen = call_times(facts.batches if single else facts.control, facts.empty, facts.ref_empty)
    med = statistics.median(seen) if seen else 0.0
    if facts.batch_draws == "pool" and fresh and seen and min(fresh) > _CACHE_RATIO * med + _CACHE_SLACK_MS:
        return (f"input_cache: calls on never-seen inputs take {min(fresh):.3f} ms or more, on repeated inputs "
                f"{med:.3f} ms (results cached by input content)")
    p = facts.profile
    if p is not None and p.unjoined_stream_kernels:
        return (f"side_stream: kernel {p.unjoined_stream_kernels[0][:60]} ran on another stream outside the call "
                "(before the caller's stream reached it, or after forward returned): not ordered with the caller")
    return custom_kernel_rule(p.profile if p else None, summary.profile, config, facts.ablation_still_right,
                              facts.ablated)


def cpu_rule(facts: Facts) -> str | None:
    """background_cpu: the candidate's processes worked where a single thread answering calls would not.

    With the runner's CPU time read call by call (its cgroup: session.Session.call), three places:
    while it had no call to answer (between its vetting's answer and the next command: a runner waits on
    its pipe then, so any work there is a thread or process of the candidate's own: precomputing the
    next inputs, slowing the reference), inside its calls' windows (more than one core's worth: threads
    the reference does not get), and in the vetting after each call (against what the reference's runner
    spends there). Without a cgroup, the whole timing phase against the wall time of the runner's part of
    each call, as before 2026-11-26."""
    calls = facts.cpu_calls
    if len(calls) >= 2:
        n = len(calls)
        idle = sum(max(0.0, nxt[0] - cur[2]) for cur, nxt in zip(calls, calls[1:], strict=False))
        if idle > _IDLE_SLACK_S + _IDLE_PER_CALL_S * n:
            return (f"background_cpu: the candidate's processes used {idle:.3f} CPU-s while its runner had no call "
                    f"to answer ({n} calls; threads or processes working between its calls)")
        inside = sum(c[1] - c[0] for c in calls)
        windows = sum(c[3] for c in calls) / 1e3
        if inside - windows > _CPU_RATIO * windows + _CPU_SLACK_S:
            return (f"background_cpu: the candidate's processes used {inside:.2f} CPU-s inside its calls, which "
                    f"took {windows:.2f} s (threads working beside its calls; the reference runs on one)")
        vet = sum(c[2] - c[1] for c in calls)
        if facts.ref_cpu:
            ref_vet = sum(r[1] for r in facts.ref_cpu) / len(facts.ref_cpu) * n
            if vet > _VET_RATIO * ref_vet + _CPU_SLACK_S:
                return (f"background_cpu: the candidate's processes used {vet:.2f} CPU-s while the harness vetted "
                        f"its {n} calls' outputs, the reference's runner {ref_vet:.2f} s for as many")
        return None
    if facts.cpu_window is None:
        return None
    used, busy = facts.cpu_window
    if used - busy > _CPU_RATIO * busy + _CPU_SLACK_S:
        return (f"background_cpu: the candidate's processes used {used:.2f} CPU-s during the timing phase, "
                f"its calls took {busy:.2f} s (threads working beside or between its calls; the reference "
                f"runs on one)")
    return None


def judged_times(facts: Facts) -> tuple[list[float], list[float]]:
    """A call's time per timed batch by the judge's own clock, the candidate's and the reference's (ms):
    the only times a speed is read from (clock.py)."""
    return both_sides(facts.batches, facts.empty, facts.ref_batches, facts.ref_empty, facts.null, facts.ref_null)


def first_launch_s(facts: Facts) -> float:
    """The candidate's first call beyond a typical call, by the judge's clock: kernels that compile at
    their first launch (Triton's JIT, CuPy's NVRTC) build there, not while the module loads. When the
    session stopped before any call came back (a compile error at first launch), the whole
    correctness phase was that first call."""
    calls = [c.judge_ms for c in facts.ledger.calls]
    if not calls:
        return facts.phase_s.get("correctness", 0.0) if facts.phase == "correctness" else 0.0
    rest = calls[1:9]
    typical = statistics.median(rest) if rest else 0.0
    return max(0.0, calls[0] - typical) / 1e3


def assemble(problem: Problem, cand: Candidate, config: SandboxConfig, summary: ReferenceSummary,
             state: ProblemState, facts: Facts, t0: float) -> Evaluation:
    from kevolve.sandbox.judge.roofline import annotate

    phases = {**{f"ref.{k}": v for k, v in summary.phase_s.items()}, **facts.phase_s}
    lazy = first_launch_s(facts)
    if lazy > 0:
        phases["first_launch"] = lazy
    build = facts.phase_s.get("compile")
    common = dict(candidate_id=cand.id, problem_id=problem.id, device=summary.device_name, ref_profile=summary.profile,
                  versions=summary.versions, compile_ref_timing=summary.compiled,
                  compile_note=summary.compile_note if summary.compiled is None else "",
                  seeds=tuple(d.draw.seed for k, d in state.draws.items() if not k.startswith("t")), phase_s=phases, cpu_s=facts.cpu_s,
                  compile_s=None if build is None else build + lazy)
    timed, ref_times = judged_times(facts)
    batch = f"+batches_of_{facts.batches[0].calls}" if facts.batches else ""
    claims = [w.claimed_ms / w.calls for w in facts.batches if w.calls]  # diagnostics only
    alone = call_times(facts.fresh, facts.empty, facts.ref_empty)  # a call alone, each side (diagnostics)
    ref_alone = call_times(facts.ref_fresh, facts.ref_empty, [])
    timing = stats(timed, method(config.is_cuda) + batch, claimed=claims, stopped=facts.timing_stop,
                   alone=alone) if timed else None
    ref_timing = stats(ref_times, method(config.is_cuda) + batch + "+interleaved",
                       alone=ref_alone) if ref_times else summary.eager
    prof = facts.profile.profile if facts.profile else None
    checks = _checks(facts)
    log = facts.stop.log if facts.stop else ""
    if facts.stop is not None:
        outcome, reason = _stop_reason(facts.stop, facts.phase)
        if facts.stop.gone is not None:
            log = facts.stop.gone.log_tail
        return Evaluation(outcome=outcome, reason=reason, checks=tuple(checks), timing=timing, ref_timing=ref_timing,
                          profile=prof, wall_s=time.monotonic() - t0, log_tail=log[-4000:], **common)
    rule = _rules(facts, summary, config)
    checks.append(CheckResult(name="integrity", passed=rule is None, detail=rule or "all rules hold"))
    if rule is not None:
        return Evaluation(outcome=Outcome.REJECTED, reason=rule, checks=tuple(checks), timing=timing,
                          ref_timing=ref_timing, profile=prof, wall_s=time.monotonic() - t0, **common)
    assert timing is not None
    prof = annotate(prof, timing.median_ms, summary.min_bytes, summary.flops, summary.device_name,
                    summary.outputs[0].dtype if summary.outputs else None)
    return Evaluation(outcome=Outcome.OK, reason="ok: correct on every call, every rule holds", checks=tuple(checks),
                      timing=timing, ref_timing=ref_timing, profile=prof, wall_s=time.monotonic() - t0, **common)


__all__ = ["assemble", "custom_kernel_rule", "infra"]
