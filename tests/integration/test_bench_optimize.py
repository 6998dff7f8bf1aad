"""`kevolve bench --optimize`: the agent (real SDK against the local fake LLM server) writes a solution
per problem into the run folder, and bench audits that set like any other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import BUILD_CACHE, FIXTURES, bench_exit_code
from fake_llm_server import FakeLLMServer

pytestmark = pytest.mark.slow
SOL = FIXTURES / "suite_solutions"


def reply(path: Path) -> str:
    return f"Here is the kernel.\n\n```python\n{path.read_text()}```\n"


def test_optimize_mode_generates_then_evaluates_and_explains_failures(tmp_path: Path) -> None:
    honest, torch_only = SOL / "level_1_problem_1_sample_0_kernel.py", SOL / "level_1_problem_1_sample_1_kernel.py"
    server = FakeLLMServer(rules=[("Task:", [reply(honest), reply(torch_only)])]).start()
    cache = BUILD_CACHE  # the suite's one C++ build, shared (the agent's reply cache goes there too)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.openai_url)
    run_dir, db = tmp_path / "run", f"sqlite:///{tmp_path / 'archive.db'}"
    cmd = [sys.executable, "-m", "kevolve.cli", "bench", "--suite", str(FIXTURES / "suite"), "--level", "1",
           "--problems", "1,6", "--optimize", "--llm", "openai:gpt-4o", "--budget", "2", "--no-archive",
           "--archive-ingest", "all", "--archive-db", db,
           "--device", "cpu", "--run-dir", str(run_dir), "--cache-dir", str(cache), "--trials", "5",
           "--max-timing-s", "0.5", "--seed", "7"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, env=env)
    finally:
        server.stop()
    assert r.returncode == bench_exit_code(run_dir), r.stdout[-3000:] + r.stderr[-3000:]
    generated = run_dir / "generated" / "level1" / "1_ReLU.py"
    assert generated.is_file(), r.stdout[-3000:] + r.stderr[-3000:]
    assert generated.read_text() == honest.read_text()  # the agent's best, its own file, as a solution file
    data = json.loads((run_dir / "results.json").read_text())
    status = {p["file"]: (p["status"], p["reason"]) for p in data["problems"]}
    assert status["1_ReLU.py"][0] == "ok"
    assert status["6_Tanh.py"] == ("no_solution", status["6_Tanh.py"][1])
    assert "found no correct kernel" in status["6_Tanh.py"][1]
    assert list((run_dir / "agent").iterdir())  # the agent's own run folders, kept for inspection
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == r.returncode and "optimize L1" not in again.stdout  # nothing regenerated on a rerun
    stored_once(db, honest.read_text(), run_dir)


def stored_once(db: str, winner: str, run_dir: Path) -> None:
    """The winner is one archive kernel (the agent's record) holding both verdicts; importing the bench
    folder afterwards adds nothing (same records as live ingest)."""
    from kevolve.archive.embed import HashingEmbedder
    from kevolve.archive.records import KernelFilter
    from kevolve.archive.store import Archive
    from kevolve.archive.transfer import import_path

    with Archive(db, embedder=HashingEmbedder()) as a:
        relu = [k for k in a.kernels(KernelFilter(outcome=None), limit=100)[0] if k.problem_name == "1_ReLU"]
        winners = [k for k in relu if a.get(k.id).kernel.source == winner]
        assert len(winners) == 1 and winners[0].origin == "translate" and winners[0].proposer == "openai:gpt-4o"
        runs = {e.run_id for e in a.get(winners[0].id).evaluations}
        # the agent's ReLU run and the bench (the Tanh run got the same text from the fake server, and the
        # archive keys a kernel on its source alone, so that verdict lands on this kernel too)
        assert f"bench-{run_dir.name}" in runs and sum(r.startswith("1_ReLU-") for r in runs) == 1, runs
        before = a.stats()
        report = import_path(a, run_dir)
        assert report.rows >= 1 and report.kernels_added == 0 and a.stats() == before


def test_optimize_mode_gives_the_agent_the_benchs_sandbox_flags(tmp_path: Path) -> None:
    """Limits, trials and rules given to `kevolve bench --optimize` are the agent's too (its run's config.json):
    a kernel the bench would reject must not win inside the agent. No LLM answers (nothing listens on the
    URL), so the agent stops at its first call, after writing its config."""
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "KEVOLVE"))}
    env["KEVOLVE_HOME"] = str(tmp_path / "home")
    cmd = [sys.executable, "-m", "kevolve.cli", "bench", "--suite", str(FIXTURES / "suite"), "--level", "1",
           "--problems", "1", "--optimize", "--llm", "vllm:none", "--base-url", "http://127.0.0.1:9/v1",
           "--budget", "1", "--no-archive", "--archive-ingest", "none", "--device", "cpu", "--run-dir", str(run_dir),
           "--cache-dir", str(tmp_path / "cache"), "--seed", "3",
           "--timeout", "77", "--memory-limit-gb", "3.5", "--trials", "4", "--max-timing-s", "0.2",
           "--compile-baseline", "off", "--allow-torch-only", "--audit", "--allow", "threads"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    configs = list((run_dir / "agent").glob("*/config.json"))
    assert len(configs) == 1, r.stdout[-3000:] + r.stderr[-3000:]
    sandbox = json.loads(configs[0].read_text())["sandbox"]
    assert {k: sandbox[k] for k in ("device", "timeout_s", "memory_limit_gb", "trials", "max_timing_s",
                                    "compile_baseline", "allow_torch_only", "audit", "policy_allow")} == {
        "device": "cpu", "timeout_s": 77.0, "memory_limit_gb": 3.5, "trials": 4, "max_timing_s": 0.2,
        "compile_baseline": "off", "allow_torch_only": True, "audit": True, "policy_allow": ["threads"]}
    assert Path(sandbox["cache_dir"]) == (tmp_path / "cache").resolve()
    assert "cannot reach the LLM server" in (run_dir / "results.json").read_text()  # the agent failed as expected
