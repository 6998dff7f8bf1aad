"""Calls rewritten into fusible ops (`decompose.py`: losses, einsum, attention) and Python-number inputs:
the IR of the rewritten graph matches the module's own output on the CPU, and every generated kernel
compiles with NVRTC for compute_90."""

from __future__ import annotations

import pytest
from kevolve.agent.offline.coverage import compile_all, ir_error, variants
from kevolve.agent.offline.generate import plan
from kevolve.kernelbench.problem import problem_from_source

_SRC = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = {module}

    def forward(self, *args):
        return {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''

PAIR = "torch.randn(5, 40) * 2, torch.randn(5, 40)"
CASES = {
    "smooth_l1_functional": ("None", "F.smooth_l1_loss(args[0], args[1])", PAIR),
    "smooth_l1_module_sum": ("nn.SmoothL1Loss(beta=0.5, reduction='sum')", "self.loss(args[0], args[1])", PAIR),
    "huber": ("nn.HuberLoss(delta=0.7)", "self.loss(args[0], args[1])", PAIR),
    "mse_plus_l1": ("None", "F.mse_loss(args[0], args[1]) + F.l1_loss(args[0], args[1])", PAIR),
    "triplet": ("nn.TripletMarginLoss(margin=0.5)", "self.loss(args[0], args[1], args[2])",
                "torch.randn(6, 30), torch.randn(6, 30), torch.randn(6, 30)"),
    "cross_entropy": ("None", "F.cross_entropy(args[0], args[1])", "torch.randn(6, 30), torch.randint(0, 30, (6,))"),
    "cross_entropy_ignore_index": ("nn.CrossEntropyLoss(ignore_index=3)", "self.loss(args[0], args[1])",
                                   "torch.randn(6, 5), torch.tensor([3, 1, 0, 3, 4, 2])"),
    "einsum_4d_by_matrix": ("None", "torch.einsum('bijl,lk->bijk', args[0], args[1])",
                            "torch.randn(2, 3, 5, 7), torch.randn(7, 6)"),
    "einsum_batched": ("None", "torch.einsum('bij,bjk->bik', args[0], args[1])", "torch.randn(2, 5, 7), torch.randn(2, 7, 6)"),
    "attention": ("None", "F.scaled_dot_product_attention(args[0], args[1], args[2])",
                  "torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 8)"),
    "attention_scaled": ("None", "F.scaled_dot_product_attention(args[0], args[1], args[2], scale=0.3)",
                         "torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 8)"),
    "python_number_input": ("None", "(args[0] + 1.0) * args[1]", "torch.randn(5, 40), 2.5"),
}


def _problem(name: str):
    module, body, inputs = CASES[name]
    return problem_from_source(_SRC.format(module=module, body=body, inputs=inputs), f"{name}.py")


@pytest.mark.parametrize("name", CASES)
def test_rewritten_loss_matches_the_module_on_cpu(name):
    why, _ = ir_error(_problem(name))
    assert why == "", why


def test_losses_become_row_kernels_and_no_loss_call_is_left():
    p = plan(_problem("triplet"))
    assert [f.group.reduce_dims for f in p.fused] == [(1,), (1,), (0,)]
    assert "loss" not in p.source().split("class ModelNew")[1]
    ce = plan(_problem("cross_entropy")).source()
    assert "torch.gather" in ce and "cross_entropy" not in ce.split("class ModelNew")[1]


def test_einsum_and_attention_become_matrix_products():
    assert plan(_problem("einsum_4d_by_matrix")).fused[0].group.kind == "gemm"
    att = plan(_problem("attention"))
    assert [f.group.reduce_dims for f in att.fused] == [(3,)]  # the scaled softmax between two cuBLAS products
    assert "torch.matmul" in att.source().split("class ModelNew")[1]


def test_python_number_input_is_a_kernel_argument():
    p = plan(_problem("python_number_input"))
    leaves = p.fused[0].group.leaves
    assert [leaf.scalar for leaf in leaves] == [False, True]
    assert "torch.full((), float(a1)" in p.source()


def test_unsupported_loss_settings_keep_the_call():
    src = _SRC.format(module="nn.CrossEntropyLoss(label_smoothing=0.1)", body="self.loss(args[0], args[1])",
                      inputs="torch.randn(6, 30), torch.randint(0, 30, (6,))")
    with pytest.raises(Exception, match="nothing_to_fuse"):
        plan(problem_from_source(src, "ce_smooth.py"))


def test_every_loss_kernel_compiles_with_nvrtc():
    sources = [s for name in CASES for s in variants(plan(_problem(name)))]
    assert compile_all(sources) == ""
