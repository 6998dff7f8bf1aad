"""`kevolve bench` end to end on the project's mini-suite, on the CPU, with real worker processes.

One full run (every verdict kind, reports, a rerun that does nothing), a `kill -9` mid-run that loses
at most the evaluation in flight, and the same problems through a local Ray instance.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testpaths import bench_exit_code

pytestmark = pytest.mark.slow
FAST = ["--device", "cpu", "--trials", "5", "--max-timing-s", "0.5", "--seed", "7", "--archive-ingest", "none"]


def bench(fixtures: Path, cache: Path, run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kevolve.cli", "bench", "--suite", str(fixtures / "suite"),
            "--solutions", str(fixtures / "suite_solutions"), "--run-dir", str(run_dir),
            "--cache-dir", str(cache), *FAST, *extra]


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]


def ingest_into(db: Path, mode: str = "all") -> list[str]:
    """Flags that make bench ingest into a test archive (FAST turns ingest off) — the last flag wins."""
    return ["--archive-ingest", mode, "--archive-db", f"sqlite:///{db}"]


def archived(db: Path) -> dict[str, tuple[str, str | None]]:
    """Candidate id -> (best outcome, run id of its evaluation) in a test archive."""
    import sqlite3

    with sqlite3.connect(db) as c:
        return {cid: (outcome, run) for cid, outcome, run in c.execute(
            "SELECT c.id, c.best_outcome, e.run_id FROM candidates c JOIN evaluations e ON e.candidate_pk = c.pk")}


def test_full_mini_suite_gives_every_verdict_and_the_reports(fixtures: Path, cpu_config, tmp_path: Path) -> None:
    run_dir, db = tmp_path / "run", tmp_path / "archive.db"
    cmd = bench(fixtures, cpu_config.cache_dir, run_dir, "--level", "1,2,4", *ingest_into(db))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == bench_exit_code(run_dir), r.stdout[-3000:] + r.stderr[-3000:]
    # every evaluated candidate went into the archive with its verdict, under this bench run
    evaluated = {x["candidate_id"]: x["status"] for x in rows(run_dir) if x["candidate_id"]}
    # every speedup is against eager timed interleaved with the candidate; the row says so
    assert {x["baseline"] for x in rows(run_dir) if x["status"] == "ok"} == {"eager interleaved"}
    assert {cid: outcome for cid, (outcome, _) in archived(db).items()} == evaluated
    assert {run for _, run in archived(db).values()} == {"bench-run"}
    data = json.loads((run_dir / "results.json").read_text())
    status = {f"L{p['level']}/{p['file']}": p["status"] for p in data["problems"]}
    assert status == {
        "L1/1_ReLU.py": "ok", "L1/2_Sigmoid.py": "ok", "L1/3_Scale.py": "incorrect",
        "L1/4_Sum_reduction_over_a_dimension.py": "ok", "L1/5_Matmul_small.py": "ok", "L1/6_Tanh.py": "no_solution",
        "L2/1_Linear_ReLU.py": "ok", "L2/2_Add_Mul.py": "rejected",  # os._exit: the policy stops it first
        "L2/3_Broken_forward.py": "problem_error",
        "L4/1_tiny_hf_model.py": "unavailable"}
    reasons = {(e["file"], e["label"]): e["reason"].split(":")[0] for e in data["evaluations"]}
    assert reasons[("1_ReLU.py", "sample_1")] == "no_custom_kernel"  # PyTorch's own op, renamed
    assert reasons[("2_Sigmoid.py", "sample_1")] == "decoy_kernel"  # custom kernel run beside the real op
    assert reasons[("2_Add_Mul.py", "sample_1")] == "compile_error"
    assert reasons[("2_Add_Mul.py", "2_Add_Mul")] == "policy_exit"
    levels = {lv["level"]: lv for lv in data["levels"]}
    assert (levels[1]["solved"], levels[1]["problems"], levels[2]["solved"]) == (4, 6, 1)
    assert all(e["eager_ms"] and e["speedup"] for e in data["evaluations"] if e["status"] == "ok")
    assert "<svg" in (run_dir / "report.html").read_text() and "| 1 | 4/6 |" in (run_dir / "report.md").read_text()
    # one result file per candidate, beside the JSONL
    assert len(list((run_dir / "evals").rglob("*.json"))) == len(rows(run_dir)) == 13  # 10 candidates, 3 problem verdicts
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == r.returncode and "10 evaluation(s) already finished, 0 to go" in again.stdout
    assert len(rows(run_dir)) == 13


def test_kill_9_mid_run_loses_at_most_the_evaluation_in_flight(fixtures: Path, cpu_config, tmp_path: Path) -> None:
    run_dir, db = tmp_path / "run", tmp_path / "archive.db"
    # with the compile pool and warm workers on the second core: the spares outlive the kill and exit alone
    cmd = bench(fixtures, cpu_config.cache_dir, run_dir, "--level", "1", "--problems", "2",
                "--compile-workers", "1", "--warm-workers", "2", *ingest_into(db))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    jsonl = run_dir / "results.jsonl"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if jsonl.exists() and jsonl.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = rows(run_dir)
    assert len(before) == 1
    assert set(archived(db)) <= {before[0]["candidate_id"]}  # nothing that was not evaluated
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == bench_exit_code(run_dir), r.stdout[-3000:] + r.stderr[-3000:]
    assert "1 evaluation(s) already finished, 1 to go" in r.stdout
    after = rows(run_dir)
    keys = [(x["problem_id"], x["label"], x["candidate_id"]) for x in after]
    assert len(keys) == len(set(keys)) == 2  # nothing evaluated twice, nothing missing
    assert after[: len(before)] == before
    # both verdicts archived, the first one even when the kill came between its result file and its archive row
    assert set(archived(db)) == {x["candidate_id"] for x in after}


def test_ray_executor_runs_problems_as_tasks(fixtures: Path, cpu_config, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    run_dir = tmp_path / "run"
    cmd = bench(fixtures, cpu_config.cache_dir, run_dir, "--level", "2", "--problems", "1-2", "--executor", "ray")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == bench_exit_code(run_dir), r.stdout[-3000:] + r.stderr[-3000:]
    got = {(x["file"], x["label"]): (x["status"], x["worker"].split(":")[0]) for x in rows(run_dir)}
    assert got == {("1_Linear_ReLU.py", "1_Linear_ReLU"): ("ok", "ray"),
                   ("2_Add_Mul.py", "2_Add_Mul"): ("rejected", "ray"),  # policy_exit
                   ("2_Add_Mul.py", "sample_1"): ("compile_error", "ray")}
    assert (run_dir / "report.html").exists()


def test_baselines_prepare_several_problems_at_once_time_one_at_a_time_and_rerun_from_the_cache(
        fixtures: Path, tmp_path: Path) -> None:
    from kevolve.kernelbench.baselines import BaselineCache, device_fingerprint, torch_version
    from kevolve.kernelbench.suite import load_suite

    cmd = [sys.executable, "-m", "kevolve.cli", "bench", "baselines", "--suite", str(fixtures / "suite"),
           "--level", "1", "--problems", "1-3", "--device", "cpu", "--cache-dir", str(tmp_path / "cache"),
           "--trials", "5", "--max-timing-s", "0.3", "--jobs", "2", "--compile-baseline", "on",
           "--out", str(tmp_path / "b.json")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = json.loads((tmp_path / "b.json").read_text())["problems"]
    assert len(rows) == 3 and all(p["measured"] and p["compile_median_ms"] for p in rows)
    windows = sorted(tuple(p["timed_window"]) for p in rows)  # as each worker's own clock saw its timing
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:])), windows
    assert sum(p["worker_started"] < windows[0][0] for p in rows) == 2  # --jobs 2: two started before any timing
    cache = BaselineCache(tmp_path / "cache" / "baselines")
    for sp in load_suite(fixtures / "suite", [1], "1-3", None):
        b = cache.get(device_fingerprint("cpu"), torch_version(), sp.problem.id)
        assert b is not None and b.compiled is not None and b.eager.median_ms > 0
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and again.stdout.count("(cached)") == 3
    assert all(p.get("timed_window") is None for p in json.loads((tmp_path / "b.json").read_text())["problems"])


def test_baselines_fill_the_cache_compare_with_published_and_are_reused(fixtures: Path, tmp_path: Path) -> None:
    published = tmp_path / "published.json"
    published.write_text(json.dumps({"level1": {"1_ReLU.py": {"mean": 0.5}, "3_Scale.py": {"mean": 0.25}}}))
    cmd = [sys.executable, "-m", "kevolve.cli", "bench", "baselines", "--suite", str(fixtures / "suite"),
           "--level", "1,2", "--problems", "1,3", "--device", "cpu", "--cache-dir", str(tmp_path / "cache"),
           "--trials", "5", "--max-timing-s", "0.3", "--published", str(published), "--out", str(tmp_path / "b.json")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    # level 2 problem 3 cannot run its own forward: a verdict for it, exit 1, the others measured
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    data = json.loads((tmp_path / "b.json").read_text())
    by = {(p["level"], p["file"]): p for p in data["problems"]}
    assert by[(2, "3_Broken_forward.py")]["error"].startswith("problem_error:")
    relu = by[(1, "1_ReLU.py")]
    assert relu["eager_median_ms"] > 0 and relu["ratio_eager"] == pytest.approx(relu["eager_mean_ms"] / 0.5)
    assert data["summary"]["level1"]["eager"]["n"] == 2 and by[(2, "1_Linear_ReLU.py")]["measured"]
    assert "| level1 | eager | 2 |" in (tmp_path / "b.md").read_text()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.stdout.count("(cached)") == 3  # every problem that was measured comes from the cache


def test_the_timeline_shows_the_build_and_the_lane_evaluates_what_is_built_while_it_waits(
        fixtures: Path, cpu_config, tmp_path: Path) -> None:
    """L1/1's sample_0 is a C++ `load_inline` kernel built by the build service on the second core (a fresh cache:
    a cold build); sample_1 has nothing to build. The lane evaluates sample_1 while sample_0 builds, and the run
    folder's timeline.jsonl shows the build, the reference, the wait and both evaluations (`--timings` prints it)."""
    from kevolve.kernelbench.timeline import read, summary

    run_dir = tmp_path / "run"
    cmd = bench(fixtures, tmp_path / "cache", run_dir, "--level", "1", "--problems", "1", "--compile-workers", "1",
                "--warm-workers", "1", "--timings")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == bench_exit_code(run_dir), r.stdout[-3000:] + r.stderr[-3000:]
    assert "outside evaluations" in r.stdout and "timeline.build" in r.stdout
    spans = read(run_dir / "timeline.jsonl")
    [build] = [s for s in spans if s["what"] == "build"]
    assert build["status"] == "built" and build["s"] > 0
    [ref] = [s for s in spans if s["what"] == "reference"]
    evals = {s["label"]: s for s in spans if s["what"] == "evaluation"}
    assert set(evals) == {"sample_0", "sample_1"}
    built_at = build["t"] + build["s"]
    assert evals["sample_0"]["t"] >= built_at - 0.5  # never evaluated before its build was done
    if built_at > ref["t"] + ref["s"]:  # still building when the problem was ready: the other one went first
        assert evals["sample_1"]["t"] < evals["sample_0"]["t"]
        assert [s["label"] for s in spans if s["what"] == "build_wait"] in ([], ["sample_0"])
    assert [x["label"] for x in rows(run_dir)] == sorted(evals, key=lambda k: evals[k]["t"])
    assert {"timeline.until_first_evaluation", "timeline.lane_idle"} <= {row[0] for row in summary(spans)}
