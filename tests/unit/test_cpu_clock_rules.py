"""The CPU's judge-side rules over hand-built facts: the runner's claimed times against the judge's own
clock (`timer_mismatch`), its CPU time read call by call against where a single thread answering calls
would spend it (`background_cpu`)."""

from __future__ import annotations

from kevolve.sandbox.checks import Ledger, check_call
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.session import Facts
from kevolve.sandbox.verdict import cpu_rule, timer_mismatch

CPU = SandboxConfig(device="cpu")
STAGE_MS = 0.01


def clocked(claimed: float, real: float, n: int = 20, overhead: float = 0.5, ref: float = 0.15) -> Facts:
    """`n` pairs: the candidate's window holds its real time, overhead and staging; it claims `claimed`."""
    f = Facts(clock_stage_ms=STAGE_MS)
    for i in range(n):
        jitter = 0.02 * ((i % 5) - 2)
        f.pairs.append((real + overhead + STAGE_MS + jitter, claimed, ref + overhead - jitter, ref))
    return f


def test_an_honest_claim_agrees_with_the_judges_clock() -> None:
    assert timer_mismatch(clocked(0.65, 0.65), CPU) is None
    assert timer_mismatch(clocked(0.02, 0.02), CPU) is None  # a tiny call: the absolute slack covers pipe noise


def test_a_claim_the_judges_clock_contradicts_is_a_timer_mismatch() -> None:
    why = timer_mismatch(clocked(0.65 / 1.8, 0.65), CPU)
    assert why is not None and why.startswith("timer_mismatch: ") and "0.361 ms" in why
    assert timer_mismatch(clocked(0.65 / 20, 0.65), CPU) is not None


def test_the_gpu_is_left_to_the_audit() -> None:
    assert timer_mismatch(clocked(0.01, 0.65), SandboxConfig(device="cuda")) is None


def calls(idle_s: float = 0.0, inside_extra_s: float = 0.0, vet_s: float = 0.005, n: int = 100) -> Facts:
    """`n` calls of 1 ms windows read from a cgroup: CPU before the command, at the account, at the vetting."""
    f, t = Facts(), 10.0
    for _ in range(n):
        t += idle_s / n
        c0, ca = t, t + 0.001 + inside_extra_s / n
        cv = ca + vet_s
        f.cpu_calls.append((c0, ca, cv, 1.0))
        t = cv
    f.ref_cpu = [(0.0005, 0.005)] * n
    return f


def test_a_runner_that_only_answers_calls_uses_no_cpu_between_them() -> None:
    assert cpu_rule(calls()) is None


def test_work_between_calls_is_background_cpu() -> None:
    why = cpu_rule(calls(idle_s=0.05))  # 0.5 ms a call while the runner had nothing to answer
    assert why is not None and "had no call to answer" in why


def test_a_second_core_inside_the_calls_is_background_cpu() -> None:
    why = cpu_rule(calls(inside_extra_s=0.2))  # 100 windows of 1 ms used 0.3 CPU-s
    assert why is not None and "inside its calls" in why


def test_vetting_far_costlier_than_the_references_is_background_cpu() -> None:
    assert cpu_rule(calls(vet_s=0.009)) is None  # within twice the reference's
    why = cpu_rule(calls(vet_s=0.02))
    assert why is not None and "vetted" in why


def test_without_a_cgroup_the_phase_is_judged_as_a_whole() -> None:
    f = Facts(cpu_window=(0.5, 0.45))
    assert cpu_rule(f) is None
    f = Facts(cpu_window=(1.2, 0.45))
    assert cpu_rule(f) is not None
