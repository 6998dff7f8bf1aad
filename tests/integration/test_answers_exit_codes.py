"""The documented exit codes of `optimize` and `bench` (issue 37): a correct kernel slower than PyTorch eager is
exit 4 with "nothing beat eager (best …x): keep your module", never a drop-in replacement with exit 0.

Real processes on the CPU: the fake OpenAI server, the real sandbox, and relu_slow.py (a correct C++ ReLU that
busy-waits 2 ms a call, far slower than eager's microseconds on any machine), built once into the session's
build cache (~30 s on two cores the first time; the optimize end-to-end tests share it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fake_llm_server import FakeLLMServer
from testpaths import BUILD_CACHE, FIXTURES

SLOW = (FIXTURES / "solutions" / "relu_slow.py").read_text()


def kevolve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    full.update(KEVOLVE_CACHE_DIR=str(BUILD_CACHE), **(env or {}))
    return subprocess.run([sys.executable, "-m", "kevolve.cli", *args], env=full, capture_output=True, text=True,
                          timeout=900)


def test_optimize_with_only_a_slower_kernel_exits_4_and_says_keep_your_module(tmp_path: Path) -> None:
    server = FakeLLMServer(rules=[("Task:", [f"```python\n{SLOW}```\n"])]).start()
    try:
        r = kevolve("optimize", str(FIXTURES / "problems" / "relu.py"), "--llm", "openai:gpt-4o", "--device", "cpu",
                    "--no-archive", "--no-cache", "--max-candidates", "1", "--islands", "1", "--timeout", "400",
                    "--runs-dir", str(tmp_path / "runs"), "--json",
                    env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.openai_url})
    finally:
        server.stop()
    result = json.loads(r.stdout) if r.stdout.strip() else {}
    last = r.stderr.strip().splitlines()[-1]
    report = (Path(result["run_dir"]) / "report.md").read_text()
    assert "Drop-in replacement" not in report and "keep your module" in report
    if result["answer"] == "none_correct":  # the winner's audit overturned it (a busy machine: background_cpu)
        assert r.returncode == 5 and last == "no candidate was correct: keep your module", r.stderr[-3000:]
        return
    assert r.returncode == 4, r.stderr[-3000:]
    assert result["answer"] == "not_faster" and result["speedup"] < 1.0
    assert last == f"nothing beat eager (best {result['speedup']:.2f}x): keep your module"


def test_bench_whose_kernels_are_all_slower_exits_4(tmp_path: Path) -> None:
    solutions = tmp_path / "solutions" / "level1"
    solutions.mkdir(parents=True)
    (solutions / "1_ReLU.py").write_text(SLOW)
    r = kevolve("bench", "--suite", str(FIXTURES / "suite"), "--level", "1", "--problems", "1", "--solutions",
                str(solutions.parent), "--run-dir", str(tmp_path / "run"), "--cache-dir", str(BUILD_CACHE),
                "--device", "cpu", "--trials", "5", "--max-timing-s", "0.5", "--archive-ingest", "none")
    assert r.returncode == 4, r.stdout[-3000:] + r.stderr[-3000:]
    assert "nothing beat eager on any problem (best 0." in r.stdout and "keep your modules" in r.stdout
