"""`kevolve optimize` end to end on the CPU: the real openai / anthropic SDKs against the local fake
server, the real LocalSandbox building C++ extensions, the real SQLite checkpointer.

Scripted replies: translations come back as a compile error and a wrong kernel; repairs as a correct
but slow kernel; mutations and crossovers as a correct fast one. The run has to repair, evolve and
pick the fast one. Four distinct sources in all, built once into the shared test build cache.
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
from testpaths import BUILD_CACHE, FIXTURES, OPTIMIZE_EXIT
from fake_llm_server import FakeLLMServer

SOL = FIXTURES / "solutions"
PROBLEM = FIXTURES / "problems" / "relu.py"


def reply(name: str) -> str:
    return f"Here is my kernel.\n\n```python\n{(SOL / name).read_text()}```\nIt should be fast.\n"


SCRIPT = [("Task: translate", [reply("relu_compile_error.py"), reply("relu_wrong.py")]),
          ("Task: repair", [reply("relu_slow.py")]),
          ("Task: mutate", [reply("relu_cpp.py")]),
          ("Task: crossover", [reply("relu_cpp.py")])]


def caches(tmp_path: Path) -> tuple[dict[str, str], list[str]]:
    """The session's build cache (extensions are built once for all tests), and a per-test LLM reply
    cache that starts empty."""
    return {"KEVOLVE_CACHE_DIR": str(BUILD_CACHE)}, ["--llm-cache", str(tmp_path / "llm")]


def optimize(args: list[str], env: dict[str, str], **kw: object) -> subprocess.Popen:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    full.update(env)
    return subprocess.Popen([sys.executable, "-m", "kevolve.cli", "optimize", *args], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)  # type: ignore[call-overload]


COMMON = ["--device", "cpu", "--no-archive", "--islands", "2", "--jobs-per-generation", "2", "--patience", "1",
          "--max-candidates", "8", "--seed", "3", "--timeout", "400"]


@pytest.fixture
def server():
    s = FakeLLMServer(rules=SCRIPT).start()
    yield s
    s.stop()


def check_picked_the_fast_one(result: dict, server: FakeLLMServer) -> None:
    run = Path(result["run_dir"])
    assert result["best_path"], (run / "report.md").read_text() + (run / "trials.jsonl").read_text()
    best = Path(result["best_path"]).read_text()
    assert "chrono" not in best and "0.5f" not in best and "relu_ext" in best  # relu_cpp.py, the fast one
    ops = [s["operator"] for s in result["lineage"]]
    assert ops == ["translate", "repair", "mutate"] or ops == ["translate", "repair", "crossover"]
    assert result["lineage"][0]["outcome"] in ("compile_error", "incorrect")
    assert result["lineage"][1]["outcome"] == "ok" and result["lineage"][2]["outcome"] == "ok"
    assert result["lineage"][2]["speedup"] > 1.5 * result["lineage"][1]["speedup"]
    assert {"compile_error", "incorrect", "ok"} <= set(result["outcomes"])
    repairs = [s.prompt for s in server.seen if s.prompt.startswith("Task: repair")]
    assert any("Compiler output" in p and "error" in p for p in repairs)  # the compiler's log
    assert any("max error" in p for p in repairs)  # where and by how much the wrong one differs
    mutates = [s.prompt for s in server.seen if s.prompt.startswith(("Task: mutate", "Task: crossover"))]
    assert mutates and all("speedup" in p and "relu_fwd" in p for p in mutates)  # timing and profile


def test_optimize_repairs_evolves_and_picks_the_fast_one_openai(server, tmp_path) -> None:
    cache_env, cache_args = caches(tmp_path)
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.openai_url, **cache_env}
    p = optimize([str(PROBLEM), "--llm", "openai:gpt-4o", "--runs-dir", str(tmp_path / "runs"), "--concurrency", "2",
                  "--json", "--quiet", *cache_args, *COMMON], env)
    out, err = p.communicate(timeout=1500)
    result = json.loads(out)
    assert p.returncode == OPTIMIZE_EXIT[result["answer"]], err[-3000:]  # the CPU ReLU may not beat eager
    check_picked_the_fast_one(result, server)
    run = Path(result["run_dir"])
    assert all(s.path.endswith("/chat/completions") for s in server.seen)
    assert result["cost_usd"] > 0 and result["prompt_tokens"] > 0
    for f in ("best_model.py", "report.md", "lineage.json", "checkpoints.sqlite", "trials.jsonl", "config.json"):
        assert (run / f).is_file(), f
    assert "sk-test" not in (run / "config.json").read_text()
    evaluated = [json.loads(x) for x in (run / "trials.jsonl").read_text().splitlines()]
    for t in evaluated:
        if t["status"] == "evaluated":
            assert (run / "candidates" / f"{t['candidate']}.json").is_file()
            assert (run / "candidates" / f"{t['candidate']}.py").is_file()


def test_kill_9_mid_run_then_resume_anthropic(server, tmp_path) -> None:
    """A real SIGKILL while a candidate is being evaluated; --resume finishes the run with at most
    one evaluation redone and no LLM request repeated."""
    cache_env, cache_args = caches(tmp_path)
    env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.anthropic_url, **cache_env}
    runs = tmp_path / "runs"
    args = ["--llm", "anthropic:claude-sonnet-4-6", "--runs-dir", str(runs), "--concurrency", "1", *cache_args,
            *COMMON]
    first = optimize([str(PROBLEM), *args], env)
    deadline = time.monotonic() + 900
    run_dir = None
    while time.monotonic() < deadline and first.poll() is None:
        run_dirs = list(runs.glob("relu-*")) if runs.exists() else []
        log = run_dirs[0] / "trials.jsonl" if run_dirs else None
        if log is not None and log.exists() and len(log.read_text().splitlines()) >= 2:
            run_dir = run_dirs[0]
            break
        time.sleep(0.5)
    assert run_dir is not None and first.poll() is None, "the first run ended before it could be killed"
    time.sleep(2.0)  # the next generation's evaluation is under way
    os.kill(first.pid, signal.SIGKILL)
    _, err1 = first.communicate(timeout=60)
    assert first.returncode == -signal.SIGKILL
    assert not (run_dir / "result.json").exists()
    before = len((run_dir / "trials.jsonl").read_text().splitlines())

    second = optimize(["--resume", run_dir.name, "--runs-dir", str(runs), "--json", *cache_args], env)
    out, err2 = second.communicate(timeout=1500)
    result = json.loads(out)
    assert second.returncode == OPTIMIZE_EXIT[result["answer"]], err2[-3000:]
    check_picked_the_fast_one(result, server)
    assert all(s.path.endswith("/messages") for s in server.seen)
    assert "resuming run" in err2
    # Evaluations finished before the kill were not redone: sandbox runs started in both sessions
    # exceed the distinct candidates evaluated by at most the one that was in flight.
    started = (err1 + err2).count("evaluating ")
    log = [json.loads(x) for x in (run_dir / "trials.jsonl").read_text().splitlines()]
    distinct = {t["candidate"] for t in log if t["status"] == "evaluated"}
    assert len(log) > before and started <= len(distinct) + 1
    assert len({t["job"] for t in log}) == len(log)  # no job finished twice
    # No request repeated: every answered request left exactly one cache entry.
    answered = [s for s in server.seen if s.status == 200]
    assert len(answered) == len(list((tmp_path / "llm").rglob("*.json")))


def test_401_stops_the_run_with_one_clear_line(server, tmp_path) -> None:
    server.always_status = 401
    cache_env, cache_args = caches(tmp_path)
    env = {"OPENAI_API_KEY": "sk-bad", "OPENAI_BASE_URL": server.openai_url, **cache_env}
    p = optimize([str(PROBLEM), "--llm", "openai:gpt-4o", "--runs-dir", str(tmp_path / "runs"), "--quiet", *cache_args,
                  "--concurrency", "1", *COMMON], env)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 1
    lines = [x for x in err.strip().splitlines() if not x.startswith("run ")]
    assert len(lines) == 1 and "401" in lines[0] and "--resume" in lines[0] and "Traceback" not in err
    assert len(server.seen) == 1  # not retried, and no other job sent after it
