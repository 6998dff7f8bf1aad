"""Issue 16, a new user's first hour: `kevolve optimize` says what is wrong in one line, in the order a
user fixes things, and exits non-zero when the environment let it produce nothing.

Real `kevolve` processes; the LLM server is the project's fake one, stopped so that its port refuses.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from fake_llm_server import FakeLLMServer
from testpaths import FIXTURES

PROBLEM = FIXTURES / "problems" / "relu.py"


def optimize(*args: str, env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "KEVOLVE_LLM"))}
    full.update(env)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "kevolve.cli", "optimize", *args], env=full, cwd=cwd,
                       capture_output=True, text=True, timeout=300)
    return r, time.monotonic() - t0


def test_an_unreachable_llm_server_exits_nonzero_within_30_s_naming_the_url(tmp_path: Path) -> None:
    server = FakeLLMServer().start()
    url = server.openai_url
    server.stop()  # nothing listens there now: connections are refused
    r, took = optimize(str(PROBLEM), "--device", "cpu", "--no-archive", "--no-cache",
                       "--runs-dir", str(tmp_path / "runs"), env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": url},
                       cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-2000:]
    # The judge prepares the problem before the first LLM call (issue 37: a problem that cannot fit costs no call);
    # the unreachable server is reported within 30 s of that.
    prepared = re.search(r"prepared relu in the judge in ([\d.]+) s", r.stderr)
    assert prepared is not None, r.stderr[-2000:]
    assert took - float(prepared.group(1)) < 30, f"took {took:.1f} s"
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"cannot reach the LLM server at {url.rstrip('/')}" in errors[0], errors[0]
    assert "check that it is running" in errors[0] and "--resume" in errors[0]


def test_a_missing_problem_file_is_reported_as_a_missing_file_before_the_key(tmp_path: Path) -> None:
    r, _ = optimize(str(tmp_path / "nope.py"), "--device", "cpu", env={}, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == f"error: {tmp_path / 'nope.py'}: no such file", r.stderr
    r, _ = optimize(str(PROBLEM), "--device", "cpu", "--no-archive", env={}, cwd=tmp_path)  # then the key
    assert r.returncode == 2 and "OPENAI_API_KEY" in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr


def test_offline_without_a_gpu_says_what_works_here(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        import pytest

        pytest.skip("this machine has a GPU")
    r, _ = optimize(str(PROBLEM), "--offline", env={}, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "needs an NVIDIA GPU" in r.stderr and "--device cpu --llm" in r.stderr and "kevolve eval" in r.stderr
