"""`kevolve eval` cold keeps a problem's torch.compile baseline in the cache bench uses (sandbox/parent/baselines.py):
the first evaluation that asks for it measures it (10.7 s of a cold H100 evaluation) and writes its timings; later
ones reuse them, labelled "(cached baseline)"; `--baselines live` measures again. Real CLI, judge and runners."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import FIXTURES

RELU = str(FIXTURES / "problems" / "relu.py")
HONEST = str(FIXTURES / "solutions" / "relu_reused_buffer.py")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A cache of the file's own (no builds here: the candidates are PyTorch only)."""
    home = tmp_path_factory.mktemp("home")
    e = {**os.environ, "HOME": str(home), "KEVOLVE_CACHE_DIR": str(home / "cache"), "KEVOLVE_WARM": "0"}
    return e


def evaluate(env: dict[str, str], solution: str, *flags: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "kevolve.cli", "eval", RELU, solution, "--device", "cpu", "--trials",
                        "3", "--allow-torch-only", "--isolation", "none", "--json", *flags],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


def cached_files(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["KEVOLVE_CACHE_DIR"]) / "baselines").rglob("*.json"))


def test_a_rejected_candidate_leaves_no_baseline(env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                   "    def forward(self, x):\n        os.system('true')\n        return x.relu()\n")
    out = evaluate(env, str(bad), "--compile-baseline", "on")
    assert out["status"] == "rejected", out["reason"]
    assert cached_files(env) == []


def test_the_compile_baseline_is_measured_once_then_reused_until_asked_live(env: dict[str, str]) -> None:
    from kevolve.sandbox.parent.baselines import Baseline

    first = evaluate(env, HONEST, "--compile-baseline", "on")
    assert first["status"] == "ok", first["reason"]
    assert first["compile_ms"] and "(cached baseline)" not in first["compile_ref_timing"]["method"]
    (written,) = cached_files(env)
    kept = Baseline.model_validate_json(written.read_text())  # timings only: no outputs on disk
    assert kept.compiled is not None and kept.compiled.median_ms == first["compile_ms"]
    assert (kept.problem_name, written.name) == ("relu", f"{kept.problem_id}.json")

    second = evaluate(env, HONEST, "--compile-baseline", "on")
    assert second["status"] == "ok", second["reason"]
    assert second["compile_ref_timing"]["method"] == first["compile_ref_timing"]["method"] + " (cached baseline)"
    assert second["compile_ms"] == first["compile_ms"]
    assert second["eager_ms"] != first["eager_ms"]  # eager is timed in every evaluation, beside the candidate

    off = evaluate(env, HONEST, "--compile-baseline", "off")  # not asked for: not reported, cached or not
    assert off["status"] == "ok" and off["compile_ms"] is None

    live = evaluate(env, HONEST, "--compile-baseline", "on", "--baselines", "live")
    assert live["status"] == "ok", live["reason"]
    assert "(cached baseline)" not in live["compile_ref_timing"]["method"]
    assert Baseline.model_validate_json(written.read_text()).compiled.median_ms == live["compile_ms"]


def test_a_wrong_baselines_value_is_one_line(env: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-m", "kevolve.cli", "eval", RELU, HONEST, "--baselines", "sometimes"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and r.stderr.strip() == "error: --baselines must be reuse or live, not 'sometimes'"
