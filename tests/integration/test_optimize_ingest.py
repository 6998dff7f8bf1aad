"""optimize ingests each evaluated candidate into a real SQLite archive as its verdict returns: all of
them, or winners only (ok and faster than everything the run stored before); a run killed with
SIGKILL mid-evaluation keeps every row already evaluated, and --resume continues the same chain."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ingest_run import MAX_CANDIDATES, run, run_as_configured
from sqlalchemy import text

from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.records import KernelFilter
from kevolve.archive.store import Archive

HERE = Path(__file__).parent


def evaluated(run_dir: Path) -> list[tuple[str, float | None]]:
    """(candidate id, speedup if ok) of every evaluated trial, in the order the verdicts returned."""
    lines = [json.loads(x) for x in (run_dir / "trials.jsonl").read_text().splitlines()]
    return [(t["candidate"], t["speedup"] if t["outcome"] == "ok" else None)
            for t in lines if t["status"] == "evaluated"]


def running_records(trials: list[tuple[str, float | None]]) -> list[str]:
    """What winners-only must store: ok candidates faster than every earlier stored one."""
    best, out = float("-inf"), []
    for cid, speedup in trials:
        if speedup is not None and speedup > best:
            best = speedup
            out.append(cid)
    return out


def archived(url: str) -> dict[str, float | None]:
    """Candidate id -> stored speedup, after checking that no kernel lacks its evaluation or index rows."""
    a = Archive(url, embedder=HashingEmbedder())
    try:
        kernels, n = a.kernels(KernelFilter(outcome=None), limit=500)
        with a.engine.connect() as conn:
            counts = {t: conn.scalar(text(f"SELECT count(*) FROM {t}"))
                      for t in ("candidates", "evaluations", "kernel_fts", "kernel_vec")}
            orphans = conn.scalar(text("SELECT count(*) FROM candidates c WHERE NOT EXISTS "
                                       "(SELECT 1 FROM evaluations e WHERE e.candidate_pk = c.pk)"))
        assert orphans == 0 and len(set(counts.values())) == 1, counts  # one of each per kernel: no partial rows
        return {k.id: k.speedup for k in kernels} if n else {}
    finally:
        a.close()


def test_all_stores_every_evaluated_candidate_as_it_returns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    r = run(tmp_path / "runs", url, "all")
    trials = evaluated(r.run_dir)
    assert len(trials) == r.evaluated == MAX_CANDIDATES
    assert set(archived(url)) == {cid for cid, _ in trials}


def test_winners_stores_only_the_improving_ok_candidates(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    r = run(tmp_path / "runs", url, "winners")
    trials = evaluated(r.run_dir)
    want = running_records(trials)
    got = archived(url)
    assert set(got) == set(want) and len(want) >= 3  # the script's speedups go up and down
    assert len(want) < sum(s is not None for _, s in trials)  # some ok candidates were left out
    assert max(got.values()) == pytest.approx(r.speedup)  # the run's best is always stored


def test_the_configured_mode_and_url_reach_the_archive(tmp_path: Path) -> None:
    """--archive-ingest / --archive-db as the CLI passes them: the config's mode, the archive at a URL."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    r = run_as_configured(tmp_path / "runs", url, "winners")
    assert set(archived(url)) == set(running_records(evaluated(r.run_dir)))


def test_kill_9_mid_run_keeps_what_was_evaluated_and_resume_continues(tmp_path: Path) -> None:
    url, runs = f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "runs"
    cmd = [sys.executable, str(HERE / "ingest_run.py"), str(runs), url, "winners", "--block-at", "6"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not (runs / "blocked").exists():
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    os.kill(proc.pid, signal.SIGKILL)  # the 6th candidate is in the sandbox
    proc.communicate(timeout=60)
    run_dir = next(p for p in runs.iterdir() if p.is_dir())
    before = evaluated(run_dir)
    assert len(before) == 5 and not (run_dir / "result.json").exists()
    assert set(archived(url)) == set(running_records(before))  # every winner evaluated so far, nothing else

    r = run(runs, url, "winners", resume=run_dir.name)
    trials = evaluated(run_dir)
    assert trials[:5] == before and r.evaluated == MAX_CANDIDATES
    assert set(archived(url)) == set(running_records(trials))
