"""The CPU coverage report: shrinking a problem's sizes, the per-problem verdicts and the script's
per-level totals (scripts/offline_coverage.py) on a suite of project-written problems."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

from kevolve.offline.coverage import Verdict, check
from kevolve.offline.graph.shrink import Budget, cost, shrink
from kevolve.contract import load_problem, problem_from_source

ROOT = Path(__file__).parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "offline"

BIG = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return torch.relu(self.norm(x))


batch_size = 512; channels = 64
groups = 4
height = width = 256
shape = (channels, height)


def get_inputs():
    return [torch.randn(batch_size, *shape, width)]


def get_init_inputs():
    return [channels, groups]
'''


def test_shrink_keeps_the_module_valid_and_within_budget():
    small = shrink(BIG, Budget(elements=1 << 16, flops=1e6))
    elems, _ = cost(small)
    assert elems <= 1 << 16
    ns: dict = {}
    exec(compile(small, "small", "exec"), ns)  # noqa: S102 — a project-written problem
    assert ns["channels"] % ns["groups"] == 0 and ns["groups"] == 4  # too small to shrink
    assert ns["shape"] == (ns["channels"], ns["height"])  # derived sizes follow (same-line statements kept)
    assert "batch_size = " in small and "channels = " in small


def test_check_reports_covered_and_the_reason_when_not():
    good = check(load_problem(FIXTURES / "conv_relu_bias.py"))
    assert good.verdict is Verdict.COVERED and good.max_err is not None and good.sources >= 1
    bad = check(load_problem(FIXTURES / "only_sort.py"))
    assert bad.verdict is Verdict.NO_CANDIDATE and bad.reason.startswith("nothing_to_fuse")


def test_check_runs_the_ir_on_the_shrunk_problem():
    problem = problem_from_source(BIG, "big.py")
    cov = check(problem, problem_from_source(shrink(BIG), "big.py"))
    assert cov.verdict is Verdict.COVERED, cov.reason


def _script():
    spec = importlib.util.spec_from_file_location("offline_coverage", ROOT / "scripts" / "offline_coverage.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["offline_coverage"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_script_prints_a_line_per_problem_and_totals_per_level(tmp_path, capsys):
    suite = tmp_path / "suite"
    (suite / "level1").mkdir(parents=True)
    (suite / "level2").mkdir()
    shutil.copy(FIXTURES / "only_sort.py", suite / "level1" / "1_Sort.py")
    shutil.copy(FIXTURES / "row_output_bias.py", suite / "level1" / "2_Rows.py")
    shutil.copy(FIXTURES / "conv_relu_bias.py", suite / "level2" / "1_Conv_ReLU_Bias.py")
    assert _script().main(["--suite", str(suite), "--out", str(tmp_path / "out"), "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "L1/1_Sort: no_candidate: nothing_to_fuse" in out and "L1/2_Rows: covered" in out
    assert "| 1 | 2 | 1 | 50% | 1 | 0 | 0 | 0 |" in out and "| 2 | 1 | 1 | 100% |" in out
    rows = [json.loads(x) for x in (tmp_path / "out" / "coverage.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in rows] == ["no_candidate", "covered", "covered"]


def test_a_generated_candidate_the_policy_refuses_is_not_covered():
    """Covered includes the judge's candidate policy: the offline proposer's L3 48/49 candidates imported
    `einops.einops` (refused on the H100, 2026-11-27) while the CPU coverage called them covered."""
    from kevolve.offline.coverage import policy_refusal
    from kevolve.offline.generate import plan

    src = plan(load_problem(FIXTURES / "conv_relu_bias.py")).source()
    assert policy_refusal([src]) == ""
    why = policy_refusal([src, src.replace("import torch\n", "import torch\nimport einops.tests\n", 1)])
    assert why.startswith("policy_import: import of einops.tests"), why


def test_the_emitter_imports_a_function_from_the_package_that_re_exports_it():
    """fx names a function by its defining module (`einops.einops.rearrange`); the candidate imports it where the
    problem did and the policy allows (`einops`), where the package holds the very same object."""
    import json

    from kevolve.offline.kernels_cuda.emit import _public_module

    assert json.decoder.JSONDecoder is json.JSONDecoder
    assert _public_module("json.decoder", "JSONDecoder") == "json"
    assert _public_module("json.decoder", "scanstring") == "json.decoder"  # json does not hold it
    assert _public_module("no.such.module", "f") == "no.such.module"
