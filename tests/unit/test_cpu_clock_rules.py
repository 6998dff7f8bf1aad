"""The CPU's judge-side rule over hand-built facts: the runner's CPU time read call by call against where a
single thread answering calls would spend it (`background_cpu`)."""

from __future__ import annotations

from kevolve.sandbox.judge.facts import Facts
from kevolve.sandbox.judge.verdict import cpu_rule

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
