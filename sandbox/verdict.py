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

from kevolve.records import Candidate, CheckResult, Evaluation, Outcome, Problem, Profile
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.oracle import ProblemState
from kevolve.sandbox.protocol import ReferenceSummary
from kevolve.sandbox.runner_proc import Gone
from kevolve.sandbox.schedule import stats
from kevolve.sandbox.session import Facts, Verdict

_STATUS = {"compile_error": Outcome.COMPILE_ERROR, "runtime_error": Outcome.RUNTIME_ERROR,
           "crashed": Outcome.CRASHED, "rejected": Outcome.REJECTED, "incorrect": Outcome.INCORRECT,
           "infra_error": Outcome.INFRA_ERROR, "timeout": Outcome.TIMEOUT}
# Work still running after the timed stream ended (side_excess) may reach this share of the event
# time plus this much before we say work ran outside the timed stream; below it, it is only counted.
_SIDE_RATIO, _SIDE_SLACK_MS = 0.5, 0.01
# Of that work, the part beyond this margin is added to the candidate's time. A device-wide sync in a
# runner that launched through CuPy waited 2-4 us longer (median) than in eager's runner, with no work
# left (H100, 2026-11-24); the margin keeps that off honest times, and bounds what a candidate can
# hide off the timed stream per call (the profile's unjoined-stream check sees such kernels too).
_COUNT_MARGIN_MS = 0.005
# CPU time the candidate's runner may use in the timing phase beyond the time it spent inside calls
# (a single thread uses at most that): this share of it plus this much (/proc counts in 10 ms ticks).
_CPU_RATIO, _CPU_SLACK_S = 0.5, 0.05
# Read call by call (cgroup): CPU the candidate's runner may use while it has no call to answer (it waits
# on its pipe then), and how much more than the reference's runner it may spend vetting its calls
_IDLE_SLACK_S, _IDLE_PER_CALL_S, _VET_RATIO = 0.02, 0.0002, 2.0
# CPU: the judge's own clock around each timed call (its command to the runner's account: the call, its
# staging, two pipe hops; step.Stepper.prepare keeps the harness's other work out of it), less what that
# window holds beyond the call on the reference's side (trusted, the call right after), may exceed the
# candidate's claimed time by this share plus this much (pipe and scheduler noise) before the claim is
# called forged.
_CLOCK_RATIO, _CLOCK_SLACK_MS = 1.25, 0.05
# A cache keyed on input content answers the rotated pool from memory; never-seen inputs, timed
# once each, then cost more than the pool's median by a margin noise does not reach.
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


def custom_kernel_rule(prof: Profile | None, ref: Profile | None, config: SandboxConfig,
                       ablation_still_right: bool = False, ablated: int | None = None) -> str | None:
    """no_custom_kernel / decoy_kernel, from the profiles and the ablation call.

    Decoy, two ways: PyTorch still runs every compute op of the reference (by family: a GEMM is a
    GEMM whether `mm`, `addmm` or `matmul`), or the output stays right when the custom kernels'
    results are replaced by random values (they did not make it, whatever ops PyTorch ran instead).
    """
    from kevolve.sandbox.profile import is_compute_op

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
    if ref_ops and ref_ops <= cand_ops:
        return (f"decoy_kernel: PyTorch still runs every op of the reference ({', '.join(sorted(ref_ops)[:4])}) "
                f"beside the custom kernel {custom[0].name[:40]}")
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
    forged = timer_mismatch(facts, config)
    if forged:
        return forged
    timed, fresh = facts.ledger.times("timed"), facts.ledger.times("fresh")
    med = statistics.median(timed) if timed else 0.0
    if fresh and min(fresh) > _CACHE_RATIO * med + _CACHE_SLACK_MS:
        return (f"input_cache: calls on never-seen inputs take {min(fresh):.3f} ms or more, on repeated inputs "
                f"{med:.3f} ms (results cached by input content)")
    p = facts.profile
    if p is not None and p.unjoined_stream_kernels:
        return (f"side_stream: kernel {p.unjoined_stream_kernels[0][:60]} still ran on another stream after "
                "forward returned (timing would miss it)")
    excess = side_excess(facts) if config.is_cuda else []
    if side_stream_seen(facts, excess):
        again = " in both timing passes" if facts.retimed else ""
        return (f"side_stream: device work outlived the timed stream{again} (a device-wide sync still waited "
                f"{statistics.median(excess):.3f} ms after it ended, median; the timed stream {med:.3f} ms)")
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


def timer_mismatch(facts: Facts, config: SandboxConfig) -> str | None:
    """CPU: the runner claims less time than the judge's own clock leaves for its calls.

    The runner's timer lives in the candidate's process, where native code (or Python reaching the
    harness's objects) can make it read anything; the judge's clock cannot be reached from there. Per
    timed call, the judge's window less what the reference's window holds beyond its own (trusted)
    time and less the staging of the outputs is what the call itself took; its median must not exceed
    the median claim by more than _CLOCK_RATIO and _CLOCK_SLACK_MS. On the GPU the window also holds the
    pad queued before the call, whose length the runner controls: the audit's looser clock rule applies
    there (audit.py)."""
    from kevolve.sandbox.audit import judge_clock

    if config.is_cuda:
        return None
    got = judge_clock(facts.pairs, facts.clock_stage_ms)
    if got is None:
        return None
    seen = got[0]
    claimed = statistics.median(p[1] for p in facts.pairs)
    if seen <= _CLOCK_RATIO * claimed + _CLOCK_SLACK_MS:
        return None
    return (f"timer_mismatch: the runner's timer claims {claimed:.3f} ms a call, the judge's own clock sees "
            f"{seen:.3f} ms (median of {len(facts.pairs)} calls, each against the reference's call after it; "
            f"the claims are not the time the calls took)")


def side_stream_seen(facts: Facts, excess: list[float] | None = None) -> bool:
    """The side-stream rule on the timed calls in the ledger (the session asks it after its first
    timing pass, to decide on a second; `_rules` on the pass the verdict is made from)."""
    excess = side_excess(facts) if excess is None else excess
    timed = facts.ledger.times("timed")
    med = statistics.median(timed) if timed else 0.0
    return bool(excess) and statistics.median(excess) > _SIDE_RATIO * med + _SIDE_SLACK_MS


def side_excess(facts: Facts) -> list[float]:
    """Per timed call: how long a device-wide sync still waited once the timed stream had ended
    (step.py), beyond what it waits in the reference's runner, timed alike between the candidate's
    calls (the sync's own cost, a few microseconds). Work left on another stream shows here; the
    host's wake-up does not (the runner spins on the end event before it syncs)."""
    walls, times = facts.ledger.walls("timed"), facts.ledger.times("timed")
    if not walls or len(walls) != len(times):
        return []
    ref = [w - m for m, w in zip(facts.ref_ms, facts.ref_walls)] if len(facts.ref_walls) == len(facts.ref_ms) else []
    floor = statistics.median(ref) if ref else 0.0
    # Signed per call, as the runner measures it: the syncs' jitter goes both ways, and clipping each
    # call at zero kept only the upward half (honest 0.06 ms kernels read 6 % slower on the H100). A
    # candidate cannot push it down: the first sync waits for everything it queued, so the second
    # one has nothing of its own to wait for.
    return [(w - m) - floor for m, w in zip(times, walls)]


def counted_times(facts: Facts, config: SandboxConfig) -> list[float]:
    """The candidate's time per timed call: its events, plus the median of what it left running on
    other streams past them, beyond a margin for the syncs' own noise (_COUNT_MARGIN_MS). Work moved
    off the timed stream is then counted, not hidden, whether or not the side-stream rule fires.

    The median, not each call's own excess: every call does the whole work, split between the timed
    stream and others, so event + excess is the same on every call and median(event) + median(excess)
    is that sum whatever the split (work off the stream on every other call, or on most calls, gains
    nothing). Each call's own excess carried the sync's per-call noise into the time: on the H100 an
    honest CuPy kernel's IQR grew from 0.7 to 6-10 us and its 3-run spread from 1 % to 4-5 %."""
    times = facts.ledger.times("timed")
    excess = side_excess(facts) if config.is_cuda else []
    if not excess:
        return times
    shift = max(0.0, statistics.median(excess) - _COUNT_MARGIN_MS)
    return [m + shift for m in times]


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


# KernelBench's timer: the events see the host's launch work, since the GPU is idle when the call starts
LAUNCH_METHOD = "judge-driven calls: cuda_events+idle_gpu_at_start+l2_flush(judge)+rotated_inputs"


def assemble(problem: Problem, cand: Candidate, config: SandboxConfig, summary: ReferenceSummary,
             state: ProblemState, facts: Facts, t0: float) -> Evaluation:
    from kevolve.sandbox.judge import _method
    from kevolve.sandbox.roofline import annotate

    phases = {**{f"ref.{k}": v for k, v in summary.phase_s.items()}, **facts.phase_s}
    lazy = first_launch_s(facts)
    if lazy > 0:
        phases["first_launch"] = lazy
    build = facts.phase_s.get("compile")
    common = dict(candidate_id=cand.id, problem_id=problem.id, device=summary.device_name,
                  versions=summary.versions, compile_ref_timing=summary.compiled,
                  compile_note=summary.compile_note if summary.compiled is None else "",
                  seeds=tuple(d.draw.seed for k, d in state.draws.items() if not k.startswith("t")), phase_s=phases, cpu_s=facts.cpu_s,
                  compile_s=None if build is None else build + lazy)
    timed = counted_times(facts, config)
    timing = stats(timed, _method(config), facts.ledger.walls("timed") if config.is_cuda else None) if timed else None
    ref_timing = stats(facts.ref_ms, _method(config) + "+interleaved") if facts.ref_ms else summary.eager
    launch = ref_launch = None
    if config.is_cuda and facts.clock:  # the clock phase's calls: GPU idle at each start (session._clock)
        launch = stats([c[1] for c in facts.clock], LAUNCH_METHOD)
        ref_launch = stats([c[3] for c in facts.clock], LAUNCH_METHOD + "+interleaved")
    common["launch_timing"], common["ref_launch_timing"] = launch, ref_launch
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
    prof = annotate(prof, timing.median_ms, summary.min_bytes, summary.flops, summary.device_name)
    return Evaluation(outcome=Outcome.OK, reason="ok: correct on every call, every rule holds", checks=tuple(checks),
                      timing=timing, ref_timing=ref_timing, profile=prof, wall_s=time.monotonic() - t0, **common)


__all__ = ["LAUNCH_METHOD", "assemble", "custom_kernel_rule", "infra"]
