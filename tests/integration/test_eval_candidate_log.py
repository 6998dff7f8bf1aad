"""What `kevolve eval` shows of a failed candidate's log is the candidate's, as it is (issue 37, defect 5: a timeout
ended with the harness's profiler lines, "… SyncActivityProfilerHandler.cpp:59] profiler_stop", which every runner
logs as it warms the profiler up). Real eval processes, real judge and runners, cold (no warm service)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testpaths import BUILD_CACHE, FIXTURES

RELU = FIXTURES / "problems" / "relu.py"
SPINS = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        while True:\n            pass\n"
# a message in square brackets, as compilers write them ("[-Wsign-compare]"): the log was printed as rich markup
RAISES = ("import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
          "        raise RuntimeError('bad layout [/oops] [-Wsign-compare]')\n")


def kevolve_eval(candidate: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "cand.py").write_text(candidate)
    cmd = [sys.executable, "-m", "kevolve.cli", "eval", str(RELU), str(tmp_path / "cand.py"), "--device", "cpu",
           "--trials", "3", "--no-warm", *args]
    env = {**os.environ, "HOME": str(tmp_path), "KEVOLVE_CACHE_DIR": str(BUILD_CACHE), "COLUMNS": "200"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def test_a_timeout_shows_no_profiler_line_of_the_harness(tmp_path: Path) -> None:
    r = kevolve_eval(SPINS, tmp_path, "--timeout", "3")
    assert r.returncode == 0 and r.stdout.startswith("timeout "), r.stdout + r.stderr
    assert "USDT" not in r.stdout + r.stderr and "profiler_st" not in r.stdout + r.stderr, r.stdout


def test_a_candidates_log_is_printed_as_text_not_markup(tmp_path: Path) -> None:
    r = kevolve_eval(RAISES, tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("runtime_error "), r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "MarkupError" not in r.stderr, r.stderr
    assert "RuntimeError: bad layout [/oops] [-Wsign-compare]" in r.stdout.splitlines(), r.stdout
    assert "USDT" not in r.stdout
