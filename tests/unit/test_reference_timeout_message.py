"""A reference that outlasts --timeout is the user's time limit, said so in one line (issue 37: `eval --timeout 0.5`
ended with "the reference failed in its runner: runner timed out: … profiler_stop", blaming the reference and
showing a log line of the harness's own profiler)."""

from __future__ import annotations

import pytest

from kevolve.sandbox.common import harness as h
from kevolve.sandbox.judge.reference_runner import ReferenceRunner
from kevolve.sandbox.judge.runner_proc import Gone

PROFILER_TAIL = ("USDT:2026-11-27 05:28:56 2:2 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
                 "USDT:2026-11-27 05:28:56 2:2 SyncActivityProfilerHandler.cpp:59] profiler_stop\n")


def reference(role: str) -> ReferenceRunner:
    ref = ReferenceRunner.__new__(ReferenceRunner)  # only what reading an answer needs: no runner is started
    ref.role, ref.limit_gb = role, 4.0
    return ref


@pytest.mark.parametrize("role", ["eager", "compiled"])
def test_a_reference_call_past_the_time_limit_says_raise_timeout_without_harness_internals(role: str) -> None:
    with pytest.raises(h.StageError) as e:
        reference(role)._read(Gone(returncode=-9, timed_out=True, log_tail=PROFILER_TAIL), nonce=1, part="call")
    reason = e.value.reason
    assert e.value.status == "problem_error" and reason.startswith("timeout: ") and "\n" not in reason
    assert "time limit" in reason and "raise --timeout" in reason and f"the {role} reference" in reason
    assert "failed" not in reason and "profiler" not in reason and "USDT" not in reason and "runner" not in reason


def test_a_reference_that_crashed_still_shows_its_last_log_line() -> None:
    with pytest.raises(h.StageError) as e:
        reference("eager")._read(Gone(returncode=-11, log_tail="Fatal Python error: Segmentation fault\n"), 1, "call")
    assert e.value.reason == ("the reference failed in its runner: runner exit -11: "
                              "Fatal Python error: Segmentation fault")


def test_an_answer_in_the_references_channel_without_the_calls_nonce_is_tampering() -> None:
    """The second layer behind the reference's channel (the first: since runners drop CAP_SYS_PTRACE, a root candidate
    without bubblewrap or Landlock no longer opens its /proc/PID/fd; tests/adversarial's forging hack now gets an
    honest speed): a frame written by anyone but its runner does not echo the call's nonce."""
    from kevolve.sandbox.judge.reference_runner import ForgedAnswer

    forged = {"ok": True, "ms": 50.0, "wall_ms": 50.0, "host_ms": 0.01, "covered": True}
    for msg in (forged, {**forged, "nonce": 7}, {**forged, "nonce": 8, "part": "vet"}):
        ref = reference("eager")
        with pytest.raises(ForgedAnswer) as e:
            ref._read(msg, 8, "call")
        assert e.value.status == "rejected" and e.value.reason.startswith("tampering: ") and ref.spoiled
    assert reference("eager")._read({**forged, "nonce": 8}, 8, "call").ms == 50.0
