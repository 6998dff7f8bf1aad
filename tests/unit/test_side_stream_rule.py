"""The side-stream rule and what a candidate's time counts, on hand-built session facts (no GPU needed).

A call's "wall" is its event time plus how long a device-wide sync still waited once the timed stream
had ended (the runner spins on the end event first, so the host's wake-up is not in it: on the H100
under bubblewrap that wake-up, 0.07-0.16 ms, once read as side-stream work). The reference, timed
between the candidate's calls, gives the sync's own cost. Whatever the candidate left running beyond
that is counted in its time, and flagged when it is a large share.
"""

from kevolve.sandbox.checks import Call
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.protocol import ReferenceSummary
from kevolve.sandbox.session import Facts
from kevolve.sandbox.verdict import _rules, counted_times
from kevolve.records import CheckResult


def facts(cand: list[tuple[float, float]], ref: list[tuple[float, float]]) -> Facts:
    f = Facts()
    for i, (ms, wall) in enumerate(cand):
        f.ledger.add(Call(n=i, key=f"d{i % 4}", phase="timed", ms=ms, wall_ms=wall,
                          check=CheckResult(name="correct:timed", passed=True), miss=None))
    f.ref_ms = [ms for ms, _ in ref]
    f.ref_walls = [w for _, w in ref]
    return f


def rule(f: Facts) -> str | None:
    summary = ReferenceSummary(problem_id="p", seed=1, device_name="H100")
    return _rules(f, summary, SandboxConfig(device="cuda"))


def side_stream(reason: str | None) -> bool:
    return reason is not None and reason.startswith("side_stream")


CUDA = SandboxConfig(device="cuda")


def test_an_honest_kernel_whose_sync_costs_what_the_references_does_is_not_a_side_stream() -> None:
    f = facts([(0.061, 0.061 + 0.004)] * 30, [(0.049, 0.049 + 0.004)] * 30)
    assert not side_stream(rule(f))
    assert counted_times(f, CUDA) == [0.061] * 30


def test_work_left_on_a_side_stream_is_flagged_and_counted() -> None:
    # KernelBench-style hack on 16 M floats: the timed stream holds nothing, 0.045 ms of work runs after it
    f = facts([(0.002, 0.002 + 0.045 + 0.004)] * 30, [(0.049, 0.049 + 0.004)] * 30)
    assert side_stream(rule(f))
    assert all(abs(t - 0.042) < 1e-9 for t in counted_times(f, CUDA))  # 0.047 less the 0.005 margin


def test_without_reference_walls_the_sync_floor_is_zero() -> None:
    assert side_stream(rule(facts([(0.002, 0.002 + 0.045)] * 30, [])))
    assert not side_stream(rule(facts([(0.061, 0.061 + 0.004)] * 30, [])))


def test_a_tail_of_slow_syncs_is_not_a_side_stream_but_work_on_every_call_is() -> None:
    # a third of the calls preempted on a loaded machine: their sync took 0.15 ms
    tail = [(0.004, 0.004 + (0.15 if i % 3 == 0 else 0.005)) for i in range(60)]
    ref = [(0.004, 0.004 + 0.004)] * 60
    assert not side_stream(rule(facts(tail, ref)))
    hacked = [(ms, wall + 0.2) for ms, wall in tail]  # 0.2 ms more on another stream, every call
    assert side_stream(rule(facts(hacked, ref)))


def test_side_work_on_every_other_call_gains_nothing() -> None:
    """An attack on a median rule: work on a side stream on half the calls only. Half the events then
    see almost nothing and the event median drops; the time counts the work left running, so the
    median stays the whole work's."""
    w = 0.4
    calls = [(0.004, 0.004 + w + 0.004) if i % 2 else (w, w + 0.004) for i in range(61)]
    f = facts(calls, [(0.004, 0.008)] * 60)
    import statistics

    assert statistics.median(counted_times(f, CUDA)) >= w


def test_hidden_work_under_the_rules_slack_is_still_counted_beyond_the_margin() -> None:
    # 0.008 ms left on a side stream behind a 0.030 ms timed stream: below the flag, inside the time
    # but for the 0.005 ms margin the syncs' own noise is allowed
    f = facts([(0.030, 0.030 + 0.008 + 0.004)] * 30, [(0.049, 0.049 + 0.004)] * 30)
    assert not side_stream(rule(f))
    assert all(abs(t - 0.033) < 1e-9 for t in counted_times(f, CUDA))


def test_side_work_on_most_calls_gains_at_most_the_margin() -> None:
    import statistics

    w = 0.4
    calls = [(0.004, 0.004 + w + 0.004) if i % 3 else (w, w + 0.004) for i in range(61)]  # 2/3 off-stream
    f = facts(calls, [(0.004, 0.008)] * 60)
    assert statistics.median(counted_times(f, CUDA)) >= w - 0.005


def test_a_runner_whose_sync_costs_a_little_more_is_not_slowed() -> None:
    """H100: a CuPy runner's device-wide sync waited 2-4 us longer than eager's runner's, work or not."""
    import statistics

    events = [0.0605 + 0.0001 * (i % 7) for i in range(60)]
    f = facts([(m, m + 0.004 + 0.003 + 0.004 * (-1) ** i) for i, m in enumerate(events)], [(0.049, 0.053)] * 60)
    assert not side_stream(rule(f))
    assert statistics.median(counted_times(f, CUDA)) == statistics.median(events)


def test_sync_jitter_both_ways_adds_nothing_to_an_honest_time() -> None:
    """The two syncs' jitter goes both ways (H100: a few microseconds either side). Clipped at zero per
    call, only the upward half stayed and an honest 0.06 ms kernel read 6 % slower; signed, it cancels."""
    import statistics

    jitter = [0.003 if i % 2 else -0.003 for i in range(60)]  # both runners alike; medians 0
    f = facts([(0.061, 0.061 + 0.004 + j) for j in jitter], [(0.049, 0.049 + 0.004 + j) for j in jitter])
    assert not side_stream(rule(f))
    assert abs(statistics.median(counted_times(f, CUDA)) - 0.061) < 1e-9  # clipped: 0.0625


def test_a_suspect_first_pass_is_timed_again_and_the_verdict_comes_from_the_second() -> None:
    """H100 soak under bubblewrap: 2 of 130 honest 4 us kernels read 13 us of side work while spare
    runners started beside them. The session times a suspect pass again (calls alike to the runner);
    the first pass's calls are kept, relabelled, and neither judged nor counted."""
    from kevolve.sandbox.session import Session
    from kevolve.sandbox.verdict import side_stream_seen

    contended = [(0.004, 0.004 + 0.013 + 0.004)] * 30
    ref = [(0.049, 0.049 + 0.004)] * 30
    f = facts(contended, ref)
    assert side_stream_seen(f)
    s = Session.__new__(Session)
    s.facts = f
    asked: list[bool] = []

    def second_pass(fresh_too: bool = True) -> None:
        asked.append(fresh_too)
        for i, (ms, wall) in enumerate([(0.004, 0.004 + 0.004)] * 30):
            f.ledger.add(Call(n=100 + i, key=f"d{i % 4}", phase="timed", ms=ms, wall_ms=wall,
                              check=CheckResult(name="correct:timed", passed=True), miss=None))

    s._timing = second_pass  # type: ignore[method-assign]
    s._retime()
    assert asked == [False]  # never-seen draws are not timed again: they have been seen
    assert f.retimed and len(f.ledger.times("timed-first")) == 30
    assert not side_stream(rule(f))
    assert counted_times(f, CUDA) == [0.004] * 30


def test_side_work_in_both_passes_is_rejected_and_says_so() -> None:
    f = facts([(0.002, 0.002 + 0.045 + 0.004)] * 30, [(0.049, 0.049 + 0.004)] * 30)
    f.retimed = True
    reason = rule(f)
    assert side_stream(reason) and "both timing passes" in reason
