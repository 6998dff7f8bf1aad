"""Gated batches (judge/gated.py, common/gate.py) through `kevolve eval` on the CPU: real judge, real runners.

On by default on a GPU only; KEVOLVE_GATE=on turns them on here, where CI can run the protocol end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import BUILD_CACHE


def _eval(problem: Path, solution: Path, home: Path) -> dict:
    cmd = [sys.executable, "-m", "kevolve.cli", "eval", str(problem), str(solution), "--device", "cpu", "--json",
           "--seed", "5", "--allow-torch-only", "--allow", "all", "--compile-baseline", "off"]
    env = {**os.environ, "HOME": str(home), "KEVOLVE_CACHE_DIR": str(BUILD_CACHE), "KEVOLVE_GATE": "on"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize(("solution", "status"), [("lookahead_by_address", "incorrect"), ("relu_torch", "ok")])
def test_a_batch_lookahead_answers_another_draws_values_when_gated(fixtures: Path, tmp_path: Path, solution: str,
                                                                   status: str) -> None:
    """The lookahead was `ok` with every slot of a batch filled at the command's start (its later calls answered
    from the first's work); gated, each later slot holds another draw's values until its call. An honest model
    is `ok` through the same protocol."""
    sol = fixtures / "solutions" / f"{solution}.py"
    if not sol.exists():
        sol = tmp_path / f"{solution}.py"
        sol.write_text("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                       "    def forward(self, x):\n        return torch.relu(x)\n")
    out = _eval(fixtures / "problems" / "relu.py", sol, tmp_path)
    assert out["status"] == status, out["reason"]
    if status == "ok":
        assert "batches_of_" in out["timing"]["method"], out["timing"]
