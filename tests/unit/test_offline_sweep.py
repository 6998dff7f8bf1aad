"""Offline proposer, the interpreter sweep (`triton_sweep.py`, `scripts/offline_interpret_sweep.py`): which
variants it runs, the uneven sizes it makes, and the script end to end on two fixtures."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from kevolve.offline.generate import plans
from kevolve.offline.graph.interpret import run_group
from kevolve.offline.graph.shrink import cost, ragged
from kevolve.offline.kernels_triton.triton_sweep import triton_plan, variants
from kevolve.contract import load_problem

ROOT = Path(__file__).parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "offline"


def test_the_sweep_runs_each_legal_variant_once_and_slices_k_only_where_the_product_is_bare():
    bare = triton_plan(load_problem(FIXTURES / "matvec.py"))
    epi = triton_plan(load_problem(FIXTURES / "linear_swish_scale.py"))
    for plan in (bare, epi):
        got = variants(plan, mutations=3)
        params = [tuple(p) for _, p in got]
        assert len(set(params)) == len(params) and got[0][0] == "default"
        assert all(plan.legalize(list(p)) == list(p) for p in params)  # as the search would emit them
    assert {p[0].split_k for _, p in variants(bare)} >= {16, 4, 32}  # defaults, split4, as many as 16-deep steps allow
    assert {p[0].split_k for _, p in variants(epi)} == {1}  # the L2 59 bug: an epilogue is never sliced
    assert "split4" not in dict(variants(epi))  # it legalises to the defaults and is dropped


def test_a_problem_without_a_triton_product_is_not_swept():
    assert triton_plan(load_problem(FIXTURES / "rmsnorm.py")) is None
    assert triton_plan(load_problem(FIXTURES / "conv_relu_bias.py")) is None  # a convolution, unless asked
    assert triton_plan(load_problem(FIXTURES / "conv_relu_bias.py"), ("mm", "tconv")) is not None


GEMM_GROUPNORM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, groups):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(groups, out_features)

    def forward(self, x):
        return torch.relu(self.norm(self.fc(x)))


batch_size = 64
in_features = 128
out_features = 256
groups = 16


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, groups]
"""


def test_ragged_sizes_are_one_less_where_the_module_allows_it():
    # powers of two fill every tile; a kernel's masks and partial tiles run only on sizes that are not
    out = ragged(GEMM_GROUPNORM)
    cost(out)  # the module still runs at the new sizes
    ns: dict = {}
    exec(compile(out, "<problem>", "exec"), ns)  # noqa: S102 — a project-written problem
    assert (ns["batch_size"], ns["in_features"]) == (63, 127)
    assert (ns["out_features"], ns["groups"]) == (256, 16)  # one at a time: 255 channels in 16 groups, 256 in 15, fail


def test_a_group_twin_given_float64_leaves_computes_in_float64():
    # the sweep's per-launch truth: the product and its epilogue on the launch's own arguments, in float64
    plan = plans(load_problem(FIXTURES / "linear_swish_scale.py"))[1]
    g = plan.fused[0].group
    args = [torch.rand(16, 1024, dtype=torch.float64), torch.rand(48, 1024, dtype=torch.float64) - 0.5,
            torch.rand(48, dtype=torch.float64)]
    out = run_group(g, args)
    x = args[0] @ args[1].T + args[2]
    assert out.dtype == torch.float64 and torch.allclose(out, x * torch.sigmoid(x) * 2.0, rtol=1e-12, atol=0)
    assert run_group(g, [a.float() for a in args]).dtype == torch.float32


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
def test_the_sweep_script_runs_fixtures_under_the_interpreter_and_writes_its_records(tmp_path: Path):
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "offline_interpret_sweep.py"), "--fixtures",
                          "--match", "^(linear_swish_scale|bmm)\\.py$", "--mutations", "0", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    recs = [json.loads(ln) for ln in (tmp_path / "sweep.jsonl").read_text().splitlines()]
    assert sorted(r["key"] for r in recs) == ["fixture/bmm", "fixture/linear_swish_scale"]
    for r in recs:
        assert r["variants"] and all(not v["error"] and v["err_inf"] <= v["allowed_inf"] for v in r["variants"])
        assert all(0 < v["group_err"] <= v["group_allowed"] for v in r["variants"])  # launches were checked
