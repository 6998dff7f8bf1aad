"""Turn a worker's exit, its report and the compared outputs into one Evaluation."""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Any

from kevolve.records import Candidate, CheckResult, Evaluation, Outcome, Problem
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.isolation import WorkerExit

if TYPE_CHECKING:
    from kevolve.sandbox.local import Reference

_STATUS = {"compile_error": Outcome.COMPILE_ERROR, "runtime_error": Outcome.RUNTIME_ERROR,
           "crashed": Outcome.CRASHED, "rejected": Outcome.REJECTED, "problem_error": Outcome.RUNTIME_ERROR,
           "infra_error": Outcome.INFRA_ERROR}
# Wall time (host clock around call + device-wide sync) may exceed event time by this much
# before we say work ran outside the timed stream.
_WALL_SLACK_RATIO, _WALL_SLACK_MS = 1.5, 0.05


def early(problem: Problem, cand: Candidate, outcome: Outcome, reason: str, t0: float) -> Evaluation:
    return Evaluation(candidate_id=cand.id, problem_id=problem.id, outcome=outcome, reason=reason,
                      wall_s=time.monotonic() - t0)


def _exit_reason(done: WorkerExit) -> tuple[Outcome, str]:
    if done.timed_out:
        return Outcome.TIMEOUT, f"timeout: no verdict within the time limit (during {done.phase}); process group killed"
    if done.memory_exceeded:
        return Outcome.CRASHED, f"memory_limit: worker exceeded its host memory limit (during {done.phase})"
    if done.disk_exceeded:
        return Outcome.CRASHED, f"disk_limit: worker wrote more than its scratch space allows (during {done.phase})"
    code = done.returncode or 0
    if done.phase in ("start-up",) and code != 0:
        last = (done.log_tail.strip().splitlines() or [""])[-1][:200]
        return Outcome.INFRA_ERROR, f"infra_error: worker failed to start: {last}"
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return Outcome.CRASHED, f"signal: worker killed by {name} during {done.phase}"
    return Outcome.CRASHED, f"exit: worker exited with code {code} during {done.phase} without a verdict"


def _integrity(ref: Reference, report: Any, config: SandboxConfig) -> str | None:
    """Rules that need the reference's facts: custom kernels present, not a decoy, time accounted."""
    from kevolve.sandbox.profile import is_compute_op

    prof = report.profile
    if prof is not None and not config.allow_torch_only:
        custom = [k for k in prof.kernels if k.custom]
        if not custom:
            used = ", ".join(sorted({o for o in prof.torch_ops if is_compute_op(o)})[:4]) or "none"
            return f"no_custom_kernel: forward ran only PyTorch's own ops ({used}); pass --allow-torch-only to permit"
        ref_ops = {o for o in (ref.report.profile.torch_ops if ref.report.profile else ()) if is_compute_op(o)}
        cand_ops = {o for o in prof.torch_ops if is_compute_op(o)}
        if ref_ops and ref_ops <= cand_ops:
            return (f"decoy_kernel: PyTorch still runs every op of the reference ({', '.join(sorted(ref_ops)[:4])}) "
                    f"beside the custom kernel {custom[0].name[:40]}")
    t = report.timing
    if t is not None and t.wall_median_ms is not None and \
            t.wall_median_ms > _WALL_SLACK_RATIO * t.median_ms + _WALL_SLACK_MS:
        return (f"side_stream: device work outlived the timed stream (wall {t.wall_median_ms:.3f} ms vs "
                f"event {t.median_ms:.3f} ms)")
    return None


def _missing_outputs(ref: Reference, report: Any, outputs: dict[str, Any]) -> list[str]:
    """Outputs the harness always hands back that this report lacks (so the harness did not write it).

    The candidate runs in the worker and can write report.json itself and exit; such a report
    would otherwise leave the parent nothing to compare.
    """
    expected = [d.key for d in ref.draws if d.key in ref.outputs]
    ident = [d.key for d in ref.draws if d.transform == "identity"]
    if len(ident) >= 2:  # candidate.py's repeat and refilled-buffer calls
        expected += [f"{ident[0]}@again", f"{ident[1]}@inplace"]
    expected += list(report.timed_keys) or ["timed calls"]
    return [k for k in expected if k not in outputs]


def assemble(problem: Problem, cand: Candidate, config: SandboxConfig, ref: Reference,
             done: WorkerExit, outputs: dict[str, Any], t0: float) -> Evaluation:
    from kevolve.sandbox import correctness

    base = dict(candidate_id=cand.id, problem_id=problem.id, device=ref.report.device_name,
                versions=ref.report.versions, ref_timing=ref.report.timing,
                compile_ref_timing=ref.report.compile_timing, seeds=tuple(d.seed for d in ref.draws))
    r = done.report
    phases = {"reference": ref.wall_s, **{f"ref.{k}": v for k, v in ref.report.phase_s.items()},
              **(r.phase_s if r else {})}
    common = dict(base, phase_s=phases, log_tail=(r.log_tail if r and r.log_tail else done.log_tail)[-4000:],
                  compile_s=r.compile_s if r else None)
    if r is None or done.timed_out or done.memory_exceeded or done.disk_exceeded:
        outcome, reason = _exit_reason(done)
        return Evaluation(outcome=outcome, reason=reason, wall_s=time.monotonic() - t0, **common)
    if r.status != "done":
        reason = r.reason if ":" in r.reason.split(" ", 1)[0] else f"{r.status}: {r.reason}"
        return Evaluation(outcome=_STATUS[r.status], reason=reason, wall_s=time.monotonic() - t0,
                          checks=r.checks, profile=r.profile, **common)
    missing = _missing_outputs(ref, r, outputs)
    if missing:
        return Evaluation(outcome=Outcome.REJECTED, wall_s=time.monotonic() - t0, **common,
                          reason=f"tampering: the worker's report has no outputs for {', '.join(missing[:4])} "
                                 "(it was not written by the harness)")
    ident = {d.key for d in ref.draws if d.transform == "identity"}
    t1 = time.monotonic()
    eager_errs = {d.key: d.eager_err for d in ref.report.draws}
    checks, failure = correctness.judge(ref.outputs, eager_errs, outputs, ident, config.tolerance_factor)
    phases["compare"] = time.monotonic() - t1
    if failure is not None:
        outcome = Outcome.INCORRECT
        return Evaluation(outcome=outcome, reason=failure, checks=tuple(checks), timing=r.timing,
                          profile=r.profile, wall_s=time.monotonic() - t0, **common)
    problem_rule = _integrity(ref, r, config)
    checks.append(CheckResult(name="integrity", passed=problem_rule is None, detail=problem_rule or "all rules hold"))
    if problem_rule is not None:
        return Evaluation(outcome=Outcome.REJECTED, reason=problem_rule, checks=tuple(checks), timing=r.timing,
                          profile=r.profile, wall_s=time.monotonic() - t0, **common)
    from kevolve.sandbox.roofline import annotate

    prof = annotate(r.profile, r.timing.median_ms if r.timing else 0.0, ref.report.min_bytes,
                    ref.report.flops, ref.report.device_name)
    return Evaluation(outcome=Outcome.OK, reason="ok: correct on every draw and every checked call",
                      checks=tuple(checks), timing=r.timing, profile=prof,
                      wall_s=time.monotonic() - t0, **common)
