"""Offline proposer: tracing, fusion, IR numerics (CPU twin of each kernel) and NVRTC compilation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from kevolve.offline.generate import NothingToFuse, plan
from kevolve.offline.graph.interpret import run_plan
from kevolve.offline.graph.trace import TraceError, load_namespace
from kevolve.contract import load_problem
from kevolve.sandbox.policy.source import custom_kernel_names

FIXTURES = Path(__file__).parent.parent / "fixtures" / "offline"
FUSABLE = ["chain_scalars", "conv_relu_bias", "linear_gelu_softmax", "conv_groupnorm", "gemm_batchnorm",
           "layernorm_3d", "rmsnorm", "reductions", "logsumexp_chain", "mse_loss", "instnorm_logsoftmax",
           "only_matmul", "bmm", "gelu_global_pool", "only_conv", "tensor_constant", "row_output_bias", "matvec",
           "linear_long_k", "einsum_4d"]


def _problem(name: str):
    return load_problem(FIXTURES / f"{name}.py")


def _reference(problem, seed: int = 0):
    ns = load_namespace(problem)
    torch.manual_seed(seed)
    model = ns["Model"](*ns["get_init_inputs"]()).eval()  # as the evaluator runs it
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):  # running stats that are not 0 / 1
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2.0)
    torch.manual_seed(seed + 1)
    inputs = ns["get_inputs"]()
    return model, inputs


@pytest.mark.parametrize("name", FUSABLE)
def test_fused_ir_matches_the_module_on_cpu(name):
    p = plan(_problem(name))
    model, inputs = _reference(p.problem)
    want = model(*inputs)
    got = run_plan(p, model, inputs)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", FUSABLE)
def test_every_generated_kernel_compiles_with_nvrtc(name):
    from kevolve.sandbox.build.compile import nvrtc_compile

    src = plan(_problem(name)).source()
    cuda = re.search(r"_KV_SRC = r'''(.*?)'''", src, re.DOTALL).group(1)
    ok, log = nvrtc_compile(cuda, arch="compute_90")
    assert ok, log
    compile(src, name, "exec")


def test_generated_source_names_its_kernels_for_the_profiler():
    p = plan(_problem("conv_groupnorm"))
    names = custom_kernel_names(p.source())
    assert "kv_fused_0" in names


def test_epilogue_keeps_the_library_call_and_fuses_the_rest():
    p = plan(_problem("conv_relu_bias"))
    assert len(p.fused) == 1
    src = p.source()
    assert "self.conv(x)" in src
    assert "_kv_launch_0(conv" in src
    assert len(p.fused[0].nodes) == 4  # relu, add, mish, sub


def test_softmax_and_groupnorm_become_row_kernels():
    soft = plan(_problem("linear_gelu_softmax")).fused[0].group
    assert (soft.reduce_dims, soft.out_scope, len(soft.reductions)) == ((1,), "elem", 2)
    gn = plan(_problem("conv_groupnorm")).fused[0].group
    assert gn.shape == (3, 4, 3, 7, 7) and gn.reduce_dims == (2, 3, 4)


def test_module_with_only_a_convolution_gets_a_direct_conv_kernel():
    g = plan(_problem("only_conv")).fused[0].group
    assert g.kind == "conv" and g.spec.kernel == (3, 3) and not g.spec.transposed


def test_module_with_only_a_sort_has_nothing_to_fuse():
    with pytest.raises(NothingToFuse, match="nothing_to_fuse"):
        plan(_problem("only_sort"))


def test_a_bare_matrix_product_becomes_a_generated_gemm():
    g = plan(_problem("bmm")).fused[0].group
    assert g.kind == "gemm" and (g.gemm.batch, g.gemm.m, g.gemm.n, g.gemm.k) == (3, 70, 65, 33)


def test_untraceable_module_gives_a_trace_verdict():
    with pytest.raises(TraceError, match="trace_failed: torch.fx cannot trace"):
        plan(_problem("untraceable"))


@pytest.mark.parametrize("name", ["layernorm_3d", "mse_loss", "conv_groupnorm", "logsumexp_chain", "reductions"])
def test_split_row_kernels_compile_with_nvrtc(name):
    from dataclasses import replace

    from kevolve.sandbox.build.compile import nvrtc_compile

    p = plan(_problem(name))
    src = p.source([replace(x, strategy="split") for x in p.defaults()])
    cuda = re.search(r"_KV_SRC = r'''(.*?)'''", src, re.DOTALL).group(1)
    assert "_s0(" in cuda
    ok, log = nvrtc_compile(cuda, arch="compute_90")
    assert ok, log
    compile(src, name, "exec")


def test_the_fallback_guard_reads_the_forwards_own_argument_names():
    """KernelBench's `forward(self, A, B)`: fx names the nodes a and b, and the guard once read those
    before they were bound (every level-1 matmul candidate raised UnboundLocalError on the H100)."""
    import ast

    src = plan(_problem("matmul_named_args")).source()
    cls = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    fwd = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    params = {a.arg for a in fwd.args.args}
    assert params == {"self", "A", "B"}
    guard = fwd.body[0]
    assert isinstance(guard, ast.If)
    import builtins

    read = {n.id for n in ast.walk(guard) if isinstance(n, ast.Name) and not hasattr(builtins, n.id)}
    assert read <= params, f"the guard reads {sorted(read - params)} before they are bound"
    pytest.importorskip("cupy")
    ns: dict = {}
    exec(compile(src, "cand.py", "exec"), ns)  # noqa: S102 - our own generated source
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    assert torch.allclose(ns["ModelNew"]().eval()(a, b), a @ b)  # on the CPU: the reference forward
