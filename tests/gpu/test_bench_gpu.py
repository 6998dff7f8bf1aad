"""`kevolve bench` on a real GPU: compile pool, warm workers, torch.compile baselines, two lanes.

A two-problem suite in KernelBench layout, built from the project's GPU fixtures: an honest
load_inline kernel (built by the compile pool, so its evaluation finds it built), an honest CuPy
kernel, and a side-stream hack.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import bench_exit_code

pytestmark = pytest.mark.gpu
HERE = Path(__file__).parent
FIX = HERE.parent / "fixtures" / "problems"


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    # -P: the repository root (the working directory) has a kevolve/ folder that is not the package
    return subprocess.run([sys.executable, "-P", "-m", "kevolve.cli", "bench", *args], capture_output=True,
                          text=True, timeout=1200)


def test_bench_on_cuda_prebuilds_warms_and_times_both_baselines(tmp_path: Path) -> None:
    import torch

    suite, sols = tmp_path / "suite" / "level1", tmp_path / "sols" / "level1"
    suite.mkdir(parents=True)
    shutil.copy(FIX / "relu_big.py", suite / "1_ReLU_big.py")
    shutil.copy(FIX / "relu.py", suite / "2_ReLU_small.py")
    (sols / "1_ReLU_big").mkdir(parents=True)
    for name in ("relu_inline", "relu_cupy", "relu_side_stream"):
        shutil.copy(HERE / "solutions" / f"{name}.py", sols / "1_ReLU_big" / f"{name}.py")
    shutil.copy(HERE / "solutions" / "relu_inline.py", sols / "2_ReLU_small.py")
    gpus = "0,1" if torch.cuda.device_count() > 1 else "0"
    run_dir = tmp_path / "run"
    args = ["--suite", str(tmp_path / "suite"), "--level", "1", "--solutions", str(tmp_path / "sols"),
            "--device", "cuda", "--gpus", gpus, "--run-dir", str(run_dir), "--cache-dir", str(tmp_path / "cache"),
            "--seed", "5", "--trials", "20", "--max-timing-s", "1", "--compile-baseline", "on",
            "--compile-workers", "2", "--warm-workers", "2"]
    r = bench(*args)
    assert r.returncode == bench_exit_code(run_dir), r.stdout[-4000:] + r.stderr[-4000:]
    rows = {(x["file"], x["label"]): x for x in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert rows[("1_ReLU_big.py", "relu_inline")]["status"] == "ok"
    assert rows[("1_ReLU_big.py", "relu_cupy")]["status"] == "ok"
    assert rows[("1_ReLU_big.py", "relu_side_stream")]["status"] in ("rejected", "incorrect")  # outputs staged too soon
    assert rows[("2_ReLU_small.py", "2_ReLU_small")]["status"] == "ok"
    inline = rows[("1_ReLU_big.py", "relu_inline")]
    assert inline["evaluation"]["compile_s"] < 10, "the compile pool should have built it already"
    assert inline["compile_ms"] and inline["speedup_vs_compile"]
    summary = json.loads((run_dir / "results.json").read_text())["levels"][0]
    assert summary["solved"] == 2 and summary["fast_compile"] is not None
    again = bench(*args)
    assert again.returncode == r.returncode and "4 evaluation(s) already finished, 0 to go" in again.stdout
