"""`kevolve bench baselines` beside published timings: the per-level distribution of measured / published.

The cache is filled by its own writer (BaselineCache.put), so run_baselines measures nothing and
only compares.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kevolve.kernelbench.baselines import Baseline, BaselineCache, device_fingerprint, torch_version
from kevolve.kernelbench.bench_baselines import out_of_memory, run_baselines
from kevolve.kernelbench.suite import load_suite
from kevolve.records import TimingStats
from kevolve.sandbox.config import CompileBaseline, SandboxConfig

MEASURED = {(1, "1_ReLU.py"): 1.0, (1, "2_Sigmoid.py"): 1.2, (1, "3_Scale.py"): 0.8,
            (1, "4_Sum_reduction_over_a_dimension.py"): 1.1, (2, "1_Linear_ReLU.py"): 3.0}


def _timing(mean: float) -> TimingStats:
    return TimingStats(median_ms=mean, mean_ms=mean, min_ms=mean, max_ms=mean, iqr_ms=0.0, trials=30, method="test")


def test_cached_baselines_beside_published_give_quartiles_per_level_in_json_markdown_and_terminal(
        fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problems = load_suite(fixtures / "suite", [1, 2], "1-4", None)
    config = SandboxConfig(device="cpu", cache_dir=tmp_path / "cache", compile_baseline=CompileBaseline.OFF)
    cache = BaselineCache(config.cache_dir / "baselines")
    for sp in problems:
        if (sp.level, sp.file) in MEASURED and sp.problem is not None:
            cache.put(Baseline(problem_id=sp.problem.id, problem_name=sp.problem.name, level=sp.level,
                               device=device_fingerprint("cpu"), torch=torch_version(),
                               eager=_timing(MEASURED[(sp.level, sp.file)]), trials=30, max_timing_s=1.0,
                               measured_at="2026-01-01T00:00:00+00:00"))
    published = tmp_path / "published.json"
    published.write_text(json.dumps({"level1": {f: {"mean": 1.0} for (lv, f) in MEASURED if lv == 1},
                                      "level2": {"1_Linear_ReLU.py": {"mean": 2.0}}}))
    only_cached = [sp for sp in problems if (sp.level, sp.file) in MEASURED]
    code = run_baselines(only_cached, config, refresh=False, published=published, out=tmp_path / "b.json")
    assert code == 0
    summary = json.loads((tmp_path / "b.json").read_text())["summary"]
    l1 = summary["level1"]["eager"]  # ratios 0.8, 1.0, 1.1, 1.2
    assert (l1["n"], l1["median"], l1["q1"], l1["q3"]) == (4, pytest.approx(1.05), pytest.approx(0.95),
                                                           pytest.approx(1.125))
    assert (l1["within_5pct"], l1["within_10pct"], l1["within_25pct"]) == (1, 2, 4)
    assert summary["level2"]["eager"]["n"] == 1 and summary["level2"]["compile"] == {"n": 0}
    row = "| level1 | eager | 4 | 1.050 | 0.950 | 1.125 | 0.800 | 1.200 | 1 | 2 | 4 |"
    assert row in (tmp_path / "b.md").read_text()
    assert row in capsys.readouterr().out  # printed last, for the terminal and the GPU script's log


@pytest.mark.parametrize(("note", "transient"), [
    ("torch.compile baseline unavailable: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", True),
    ("torch.compile baseline unavailable: BackendCompilerFailed: unsupported op aten.foo", False),
])
def test_a_compile_baseline_lost_to_memory_is_not_kept_as_the_problems_verdict(note: str, transient: bool) -> None:
    b = Baseline(problem_id="p", problem_name="p", device="d", torch="t", eager=_timing(1.0), compile_note=note,
                 trials=30, max_timing_s=1.0, measured_at="2026-01-01T00:00:00+00:00")
    assert out_of_memory(b) is transient
