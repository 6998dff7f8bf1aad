"""Gated batches (judge/gated.py, common/gate.py) through `kevolve eval` on the CPU: real judge, real runners.

Off by default (their cost on a GPU: judge/gated.py); KEVOLVE_GATE=on turns them on here, where CI runs the protocol
end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import BUILD_CACHE


# A batch lookahead (red team 9, written for the CPU): at the first call of a batch it finds every buffer shaped as
# its input (the runner's slots), computes all their outputs, and answers the batch's later calls from them by
# address (a call within 1 ms of the one before is taken as the same batch). Ungated, each slot held its draw from
# the command's start: correct on every call, the batch's work done at its first. Gated, a later slot holds another
# draw's values until its own call: the cached answer is another draw's. Not under tests/fixtures/solutions (every
# file there must pass the candidate policy: this one walks the heap).
LOOKAHEAD = """import gc
import time

import torch
import torch.nn as nn

_bufs = None
_cache = {}
_last = [0.0]


class ModelNew(nn.Module):
    def forward(self, x):
        global _bufs
        if _bufs is None:
            _bufs = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and o.shape == x.shape
                     and o.dtype == x.dtype and o.device == x.device]
        now = time.perf_counter()
        gap, _last[0] = now - _last[0], now
        hit = _cache.pop(x.data_ptr(), None)
        if hit is not None and gap < 1e-3:
            return hit.clone()
        _cache.clear()
        for b in _bufs:
            if b.data_ptr() != x.data_ptr():
                _cache[b.data_ptr()] = torch.relu(b)
        _last[0] = time.perf_counter()
        return torch.relu(x)
"""
HONEST = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"


def _eval(problem: Path, solution: Path, home: Path) -> dict:
    cmd = [sys.executable, "-m", "kevolve.cli", "eval", str(problem), str(solution), "--device", "cpu", "--json",
           "--seed", "5", "--allow-torch-only", "--allow", "all", "--compile-baseline", "off"]
    env = {**os.environ, "HOME": str(home), "KEVOLVE_CACHE_DIR": str(BUILD_CACHE), "KEVOLVE_GATE": "on"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize(("solution", "status"), [(LOOKAHEAD, "incorrect"), (HONEST, "ok")], ids=["lookahead", "honest"])
def test_a_batch_lookahead_answers_another_draws_values_when_gated(fixtures: Path, tmp_path: Path, solution: str,
                                                                   status: str) -> None:
    """The lookahead was `ok` with every slot of a batch filled at the command's start (its later calls answered
    from the first's work); gated, each later slot holds another draw's values until its call. An honest model
    is `ok` through the same protocol."""
    sol = tmp_path / "solution.py"
    sol.write_text(solution)
    out = _eval(fixtures / "problems" / "relu.py", sol, tmp_path)
    assert out["status"] == status, out["reason"]
    if status == "ok":
        assert "batches_of_" in out["timing"]["method"], out["timing"]
