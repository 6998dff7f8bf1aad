"""Calls rewritten into fusible ops (`decompose.py`: losses, einsum, attention) and Python-number inputs:
the IR of the rewritten graph matches the module's own output on the CPU, and every generated kernel
compiles with NVRTC for compute_90."""

from __future__ import annotations

import pytest
from kevolve.offline.coverage import compile_all, ir_error, variants
from kevolve.offline.generate import plan
from kevolve.contract import problem_from_source
from offline_cases import REWRITE_TEMPLATE, REWRITES, rewrite_problem


@pytest.mark.parametrize("name", REWRITES)
def test_rewritten_loss_matches_the_module_on_cpu(name):
    why, _ = ir_error(rewrite_problem(name))
    assert why == "", why


def test_losses_become_row_kernels_and_no_loss_call_is_left():
    p = plan(rewrite_problem("triplet"))
    assert [f.group.reduce_dims for f in p.fused] == [(1,), (1,), (0,)]
    assert "loss" not in p.source().split("class ModelNew")[1]
    ce = plan(rewrite_problem("cross_entropy")).source()
    assert "torch.gather" in ce and "cross_entropy" not in ce.split("class ModelNew")[1]


def test_einsum_and_attention_become_matrix_products():
    assert plan(rewrite_problem("einsum_4d_by_matrix")).fused[0].group.kind == "gemm"
    att = plan(rewrite_problem("attention"))
    assert [f.group.reduce_dims for f in att.fused] == [(3,)]  # the scaled softmax between two cuBLAS products
    assert "torch.matmul" in att.source().split("class ModelNew")[1]


def test_python_number_input_is_a_kernel_argument():
    p = plan(rewrite_problem("python_number_input"))
    leaves = p.fused[0].group.leaves
    assert [leaf.scalar for leaf in leaves] == [False, True]
    assert "torch.full((), float(a1)" in p.source()


def test_unsupported_loss_settings_keep_the_call():
    src = REWRITE_TEMPLATE.format(module="nn.CrossEntropyLoss(label_smoothing=0.1)", body="self.loss(args[0], args[1])",
                      inputs="torch.randn(6, 30), torch.randint(0, 30, (6,))")
    with pytest.raises(Exception, match="nothing_to_fuse"):
        plan(problem_from_source(src, "ce_smooth.py"))


def test_every_loss_kernel_compiles_with_nvrtc():
    sources = [s for name in REWRITES for s in variants(plan(rewrite_problem(name)))]
    assert compile_all(sources) == ""


@pytest.mark.parametrize("name", ["huber", "python_number_input"])
def test_candidate_with_varargs_forward_falls_back_on_the_cpu(name):
    """forward(self, *args): the guard reads the tuple (CPU inputs fall back to the reference)."""
    import torch
    from kevolve.offline.graph.trace import load_namespace

    problem = rewrite_problem(name)
    ns: dict = {}
    exec(compile(plan(problem).source(), f"{name}.py", "exec"), ns)  # noqa: S102 — a generated candidate
    spec = load_namespace(problem)
    torch.manual_seed(1)
    inputs = spec["get_inputs"]()
    torch.testing.assert_close(ns["ModelNew"]().eval()(*inputs), ns["Model"]().eval()(*inputs))
