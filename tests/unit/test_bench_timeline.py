"""A bench's lane takes its candidates as their builds finish, and its timeline says where the time outside
evaluations went (build service, waits for builds, references), even when a kill cut the bench short."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

from kevolve.kernelbench.runner import CandidateFile, LocalExecutor, make_plan
from kevolve.kernelbench.solutions import discover
from kevolve.kernelbench.suite import load_suite
from kevolve.kernelbench.timeline import Timeline, read, summary
from kevolve.sandbox.build.service import BuildResult, BuildStatus
from kevolve.sandbox.config import SandboxConfig


def _candidates(fixtures: Path) -> tuple[CandidateFile, ...]:
    """Problem 2's two candidates, as the plan builds them."""
    plan = make_plan(load_suite(fixtures / "suite", [1], problems="2"), discover(fixtures / "suite_solutions"), set())
    return plan.jobs[0].candidates


def _built(key: str) -> BuildResult:
    return BuildResult(ok=True, key=key, status=BuildStatus.BUILT, seconds=2.0, queued_s=0.5)


def test_the_lane_takes_the_candidate_whose_build_finished_first_and_waits_only_when_none_has(
        fixtures: Path, tmp_path: Path) -> None:
    first, second = _candidates(fixtures)
    timeline = Timeline(tmp_path / "timeline.jsonl")
    ex = LocalExecutor(["cpu"], SandboxConfig(device="cpu"), None, True, "cpu", timeline=timeline)
    slow, fast = Future(), Future()
    ex.builds = {first.candidate.id: [slow], second.candidate.id: [fast]}
    fast.set_result(_built("b" * 16))
    order = ex.in_build_order((first, second), "local:cpu")
    assert next(order) is second  # the plan's second, built: not held back by the first's build
    threading.Timer(0.3, lambda: slow.set_result(_built("a" * 16))).start()
    assert next(order) is first  # only now, after waiting for it
    assert list(order) == []
    [wait] = [sp for sp in read(tmp_path / "timeline.jsonl") if sp["what"] == "build_wait"]
    assert wait["label"] == first.label and 0.25 < wait["s"] < 5
    assert ex.build_seconds == 4.0


def test_the_plans_order_stands_among_candidates_that_are_all_built(fixtures: Path) -> None:
    cands = _candidates(fixtures)
    ex = LocalExecutor(["cpu"], SandboxConfig(device="cpu"), None, True, "cpu")
    ex.builds = {}  # nothing built ahead (no compile pool): every candidate is ready, the worker builds
    assert list(ex.in_build_order(cands, "local:cpu")) == list(cands)


def test_the_timeline_summary_counts_spans_the_first_evaluation_and_a_span_cut_by_a_kill(tmp_path: Path) -> None:
    tl = Timeline(tmp_path / "timeline.jsonl")
    tl.add("lane_start", 0.0, 2.0, lane="L")
    tl.add("reference", 2.0, 3.0, lane="L", problem="L1/1", id=1)
    tl.add("builds_submitted", 0.1, 0.0, n=3)
    tl.add("build", 0.0, 12.0, key="k1")
    tl.add("build_wait", 5.0, 7.0, lane="L", id=2)
    tl.add("evaluation", 12.0, 1.0, lane="L", id=3)
    tl.add("begun", 13.0, 0.0, of="reference", lane="L", problem="L1/24", id=4)  # its end never written
    rows = {r[0]: r for r in summary(read(tmp_path / "timeline.jsonl"), wall_s=60.0)}
    assert rows["timeline.until_first_evaluation"][3] == "12.0"
    assert rows["timeline.build_wait"][1:4] == ("1", "7.000", "7.0")
    cut = rows["timeline.reference (unfinished)"]
    assert cut[3] == "47.0" and "L1/24" in cut[4]
    # the lane: 2 + 3 + 7 + 1 busy and 47 in the cut reference, of 60 s
    assert rows["timeline.lane_idle"][3] == "0.0"
    assert "timeline.pch" not in rows
    assert rows["timeline.build (unfinished)"][1] == "2"  # 3 submitted, 1 built
