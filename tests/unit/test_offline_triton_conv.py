"""Offline proposer, Triton convolutions (`triton_conv.py`): the implicit-GEMM kernel run on the CPU under
TRITON_INTERPRET=1 against the module (plain, transposed, grouped, strided, dilated, 1-3 d, with and
without a fused epilogue), compiled for sm_90 with tensor cores, and its place among the plan variants."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest
from kevolve.offline.generate import plans
from kevolve.offline.space import default_params, legal, more_precise
from kevolve.contract import load_problem
from kevolve.sandbox.policy.source import custom_kernel_names
from offline_cases import triton_check

if importlib.util.find_spec("triton") is None:  # not imported here: the interpreter needs a fresh process
    pytest.skip("needs triton", allow_module_level=True)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "offline"
CONVS = ["only_conv", "conv_relu_bias", "convt_grouped", "conv3d_dilated", "conv_groupnorm"]


def _variants(name: str):
    ps = plans(load_problem(FIXTURES / f"{name}.py"))
    assert [p.technique for p in ps] == ["cuda", "triton_mm"]
    return ps


def test_triton_convolutions_match_the_module_under_the_interpreter():
    errs = triton_check("--layout=nchw", *CONVS)
    assert sorted(errs) == sorted(CONVS)
    for name, (default, mutated) in errs.items():
        assert default < 1e-4 and mutated < 1e-4, (name, default, mutated)


def test_channels_last_triton_convolutions_match_the_module_under_the_interpreter():
    # the launcher makes the input channels-last and the weight group-channels-innermost; the kernel walks the
    # window, then a group's channels in contiguous steps (`triton_conv._nhwc_loop`)
    errs = triton_check("--nhwc", *CONVS)
    assert sorted(errs) == sorted(CONVS)
    for name, (default, mutated) in errs.items():
        assert default < 1e-4 and mutated < 1e-4, (name, default, mutated)
    src = _variants("convt_grouped")[1].source([replace(p, layout="nhwc") for p in
                                               _variants("convt_grouped")[1].defaults()])
    assert "a0 = a0.movedim(1, -1).contiguous()" in src and "for c0 in range(0, 2, BLOCK_K):" in src


def test_triton_convolutions_compile_for_hopper_with_tensor_cores():
    for layout in ([], ["--nhwc"]):
        got = triton_check("--compile", *layout, "convt_grouped", "conv3d_dilated")
        assert got == {"convt_grouped": ["wgmma", "fma"], "conv3d_dilated": ["wgmma", "fma"]}, layout  # tf32x3, ieee
    # the library layout's kernels are the epilogue alone (no product in it) and the input's channels-last copy
    got = triton_check("--compile", "--layout=library", "convt_grouped", "conv3d_dilated", "conv_relu_bias")
    assert got == {name: ["fma", "copy"] * 2 for name in ("convt_grouped", "conv3d_dilated", "conv_relu_bias")}


def test_library_convolutions_with_a_triton_epilogue_match_the_module_under_the_interpreter():
    # cuDNN's convolution on channels-last operands without its bias (torch.nn.functional, on the CPU here);
    # the kernel adds the bias and the element-wise chain to the channels-last result and writes the output
    # in the module's layout
    errs = triton_check("--layout=library", *CONVS)
    assert sorted(errs) == sorted(CONVS)
    for name, (default, mutated) in errs.items():
        assert default < 1e-4 and mutated < 1e-4, (name, default, mutated)
    tri = _variants("conv_relu_bias")[1]
    src = tri.source()  # an epilogue after a 2-d convolution: the library layout is the default
    assert tri.legalize(tri.defaults())[0].layout == "library"
    assert "torch.nn.functional.conv2d(xcl, a1, None, (1, 1), (0, 0), (1, 1), 1)" in src
    assert "kv_tconv_0_cl[(2, 1, 2)](a0, xcl, BLOCK_C=4, BLOCK_S=64" in src and "tl.dot" not in src
    tt = _variants("convt_grouped")[1]
    src = tt.source([replace(p, layout="library") for p in tt.defaults()])
    assert "conv_transpose2d(xcl, a1, None, (2, 2), (1, 1), (1, 1), 3, (1, 1))" in src
    assert "BIAS + g * 3 + rn" in src  # the module's bias, added by the kernel
    bare = _variants("only_conv")[1]
    assert bare.legalize(bare.defaults())[0].layout == "nchw"  # a lone convolution: the Triton convolution first
    feeds = _variants("conv_groupnorm")[1]  # no epilogue, but its output feeds the group norm's kernel
    assert [p.layout for p in feeds.legalize(feeds.defaults())] == ["library", "nchw"]
    src = feeds.source()
    assert "torch.nn.functional.conv2d(xcl, a1, None" in src and "BIAS + g * " in src and "tl.dot" not in src


def test_a_library_convolution_that_is_incorrect_is_repaired_by_the_triton_convolution_in_tf32x3():
    # cuDNN's channels-last call may run TF32 where eager's NCHW call ran fp32 (`reduced_precision`): the
    # repair is the implicit GEMM with fp32-level error
    g = _variants("conv_relu_bias")[1].fused[0].group
    p = default_params(g)
    q = more_precise(p, g)
    assert (p.layout, q.layout, q.precision) == ("library", "nchw", "tf32x3")
    assert legal(replace(p, precision="ieee", stages=4, tile_k=64), g) == p  # one candidate, whatever those say


def test_each_convolution_kind_becomes_one_triton_kernel():
    # level 1 (a direct CUDA kernel in the CUDA plan) and level 2 (a cuDNN call plus an epilogue kernel there)
    # both become one Triton kernel; a row kernel after the convolution stays a CUDA kernel reading it
    kinds = {name: [f.group.kind for f in _variants(name)[1].fused] for name in CONVS}
    assert kinds == {"only_conv": ["tconv"], "conv_relu_bias": ["tconv"], "convt_grouped": ["tconv"],
                     "conv3d_dilated": ["tconv"], "conv_groupnorm": ["tconv", "fused"]}
    cuda, tri = _variants("conv_relu_bias")
    assert [f.group.kind for f in cuda.fused] == ["fused"]  # the convolution stays cuDNN there
    src = tri.source()
    forward = src.split("class ModelNew")[1]
    assert "self.conv(" not in forward and "relu" not in forward and "kv_tconv_0" in custom_kernel_names(src)
    assert "import cupy" not in src and str(tri.fused[0].group.describe()).endswith("+epilogue")


def test_convolutions_start_in_tf32_and_repair_towards_fp32():
    # cuDNN runs PyTorch's float32 convolutions in TF32 by default, so TF32 is the first try; an incorrect
    # verdict moves one step towards fp32 (a product's start, tf32x3, moves to ieee)
    conv = _variants("only_conv")[1].fused[0].group  # no epilogue: the implicit GEMM is the default
    p = default_params(conv)
    assert p.precision == "tf32"
    assert [more_precise(p, conv).precision, more_precise(more_precise(p, conv), conv).precision] == ["tf32x3", "ieee"]
    mm = _variants_mm()
    q = default_params(mm)
    assert q.precision == "tf32x3" and more_precise(q, mm).precision == "ieee"
    assert legal(p.__class__(precision="tf32"), mm).precision == "tf32x3"  # never TF32 for an fp32 matmul


def _variants_mm():
    return plans(load_problem(FIXTURES / "only_matmul.py"))[1].fused[0].group


def test_tiles_fit_the_channels_and_stay_within_registers():
    g = _variants("convt_grouped")[1].fused[0].group  # 3 output channels per group
    p = default_params(g)
    assert p.tile_n == 16 and p.tile_m * p.tile_n // (32 * p.warps) <= 128
    big = p.__class__(tile_m=256, tile_n=256, warps=4, precision="tf32")
    q = legal(big, g)
    assert q.tile_n == 16 and q.tile_m * q.tile_n // (32 * q.warps) <= 128


def test_the_search_tries_channels_last_convolutions_once_after_the_defaults():
    from kevolve.offline.search import search
    from kevolve.records import Evaluation, Outcome, TimingStats

    ps = _variants("conv_relu_bias")

    def verdict(got) -> Evaluation:  # noqa: ANN001 - a Generated; the Triton variant wins, so the search evolves it
        ms = 0.5 if "kv_tconv_0" in got.source else 0.9
        t = TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, trials=5, method="fake")
        return Evaluation(candidate_id="c", problem_id=ps[0].problem.id, outcome=Outcome.OK, reason="ok", timing=t,
                          ref_timing=t.model_copy(update={"median_ms": 1.0}), wall_s=1.0)

    res = search(ps, verdict, budget=3)
    assert [t.technique for t in res.trials] == ["cuda", "triton_mm", "triton_mm"]
    assert [p.layout for p in res.trials[2].params] == ["nhwc"] and res.trials[1].params[0].layout == "library"
