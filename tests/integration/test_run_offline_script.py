"""scripts/run_offline_gpu.py on the CPU: the whole pipeline (suite, tracing, sandbox verdicts, result
files, summary) and its resumability. On the CPU the generated CUDA cannot run, so the verdicts are
failures; the GPU numbers come from running the same script on a GPU machine."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "offline"


def _script():
    spec = importlib.util.spec_from_file_location("run_offline_gpu", ROOT / "scripts" / "run_offline_gpu.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["run_offline_gpu"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_sample_spreads_over_the_level():
    s = _script()
    assert s.sample_numbers(list(range(1, 101)), 4) == [1, 26, 51, 76]
    assert s.sample_numbers([1, 2, 3], 30) == [1, 2, 3]


def test_summary_counts_solved_share_and_geomeans(tmp_path):
    s = _script()
    rows = [{"level": 2, "status": "solved", "speedup": 2.0, "speedup_vs_compile": 1.0, "device": "H100",
             "speedup_launch": 1.6, "device_pick": {"speedup": 2.5, "speedup_launch": 0.9, "same": False}},
            {"level": 2, "status": "solved", "speedup": 0.5, "speedup_vs_compile": 0.25, "device": "H100",
             "speedup_launch": 0.4, "device_pick": {"speedup": 0.5, "speedup_launch": 0.4, "same": True}},
            {"level": 2, "status": "failed", "reason": "incorrect: x"},
            {"level": 2, "status": "no_candidate", "reason": "nothing_to_fuse: conv"}]
    for i, r in enumerate(rows):
        (tmp_path / f"L2_{i}.json").write_text(json.dumps(r))
    out = s.summarize(tmp_path, [2])
    assert "| 2 | 4 | 2 | 50% | 1 | 1.00x | 0.50x | 0.80x | H100 |" in out
    assert "failed: incorrect (1)" in out and "no_candidate: nothing_to_fuse (1)" in out
    # per-problem table last; no settings recorded; what ranking by device time alone would have kept
    assert out.splitlines()[-4].startswith("| L2_? | solved | - | - | 2.00x | 1.00x | 1.60x | 2.50x / 0.90x | - |")
    assert out.splitlines()[-3].startswith("| L2_? | solved | - | - | 0.50x | 0.25x | 0.40x | same | - |")


def test_cpu_run_writes_results_and_resumes(tmp_path, capsys):
    s = _script()
    suite = tmp_path / "suite" / "level2"
    suite.mkdir(parents=True)
    shutil.copy(FIXTURES / "conv_relu_bias.py", suite / "1_Conv_ReLU_Bias.py")
    shutil.copy(FIXTURES / "only_sort.py", suite / "2_Sort.py")
    out = tmp_path / "out"
    args = ["--suite", str(tmp_path / "suite"), "--levels", "2", "--out", str(out), "--device", "cpu",
            "--budget", "1", "--timeout", "120", "--cache-dir", str(tmp_path / "cache")]
    assert s.main(args) == 0
    first = json.loads((out / "L2_1.json").read_text())
    assert first["status"] == "failed" and first["trials"]  # evaluated; CUDA kernels cannot run on the CPU
    assert json.loads((out / "L2_2.json").read_text())["status"] == "no_candidate"
    (out / "L2_1.json").write_text(json.dumps(first | {"status": "solved", "speedup": 1.5, "speedup_vs_compile": 1.2}))
    assert s.main(args) == 0  # finished problems are skipped: the edited result stands
    assert "| 2 | 2 | 1 | 50% | 1 | 1.50x | 1.20x |" in capsys.readouterr().out


def test_results_travel_in_a_bundle(tmp_path):
    s = _script()
    out, again = tmp_path / "out", tmp_path / "again"
    out.mkdir()
    (out / "L1_3.json").write_text(json.dumps({"level": 1, "status": "failed", "reason": "incorrect: x"}))
    (out / "L1_3.best.py").write_text("x = 1\n")
    s.pack(out, tmp_path / "b" / "results.tgz")
    again.mkdir()
    s.unpack(tmp_path / "b" / "results.tgz", again)
    assert sorted(p.name for p in again.iterdir()) == ["L1_3.best.py", "L1_3.json"]
