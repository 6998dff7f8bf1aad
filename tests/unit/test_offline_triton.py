"""Offline proposer, Triton products: the epilogue fused into a Triton matrix product, run on the CPU
under TRITON_INTERPRET=1 against the module, and the search over both plan variants."""

from __future__ import annotations

import importlib.util
import random
from dataclasses import replace
from pathlib import Path

import pytest
from kevolve.kernel_params import KernelParams
from kevolve.offline.generate import Generated, plans
from kevolve.offline.proposer import OfflineGenerator
from kevolve.offline.search import search
from kevolve.offline.space import bare_product, legal, mutate
from kevolve.offline.kernels_triton.triton_mm import kernel_source
from kevolve.contract import load_problem
from kevolve.records import Evaluation, Outcome, Profile, TimingStats
from kevolve.sandbox.policy.source import custom_kernel_names
from offline_cases import triton_check

if importlib.util.find_spec("triton") is None:  # not imported here: the interpreter needs a fresh process
    pytest.skip("needs triton", allow_module_level=True)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "offline"
PRODUCTS = ["gemm_batchnorm", "linear_gelu_softmax", "only_matmul", "bmm", "einsum_4d", "conv1x1", "matmul_deep",
            "linear_swish_scale"]


def _triton_plan(name: str):
    ps = plans(load_problem(FIXTURES / f"{name}.py"))
    assert [p.technique for p in ps] == ["cuda", "triton_mm"]
    return ps[1]


def test_triton_product_kernels_match_the_module_under_the_interpreter():
    errs = triton_check(*PRODUCTS)
    assert sorted(errs) == sorted(PRODUCTS)
    for name, (default, mutated) in errs.items():
        assert default < 1e-4 and mutated < 1e-4, (name, default, mutated)


def test_triton_product_kernels_compile_for_hopper_with_tensor_cores_in_tf32x3():
    got = triton_check("--compile", "gemm_batchnorm", "bmm")
    assert got == {"gemm_batchnorm": ["wgmma", "fma"], "bmm": ["wgmma", "fma"]}  # tf32x3, then ieee


def test_an_elementwise_chain_after_a_linear_layer_becomes_its_epilogue():
    p = _triton_plan("gemm_batchnorm")
    (g,) = [f.group for f in p.fused]
    assert g.kind == "mm" and g.spec.b_layout == "nk" and g.spec.bias
    got = p.generate()
    src = got.source
    assert "self.gemm(" not in src.split("class ModelNew")[1] and "kv_mm_0" in custom_kernel_names(src)
    assert got.choice.technique == "triton_mm" and list(got.choice.groups) == p.legalize(p.defaults())


def test_the_linear_gelu_fixture_is_one_triton_product_with_its_epilogue_in_tf32x3():
    # tests/fixtures/problems/linear_gelu.py: the main job's candidate fixture for beating torch.compile (cuBLAS
    # in fp32 there; tf32x3 keeps fp32-level error on tensor cores)
    ps = plans(load_problem(Path(__file__).parent.parent / "fixtures" / "problems" / "linear_gelu.py"))
    cuda, tri = ps
    assert [f.group.kind for f in cuda.fused] == ["fused"]  # cuBLAS, then one epilogue kernel
    (g,) = [f.group for f in tri.fused]
    (q,) = tri.legalize(tri.defaults())
    assert g.kind == "mm" and g.spec.bias and g.spec.gemm.m == 8192 and q.precision == "tf32x3"
    forward = tri.source().split("class ModelNew")[1]
    assert "self.linear(" not in forward and "gelu" not in forward


def test_a_pointwise_convolution_is_a_batched_triton_product_over_nchw():
    # weight (Cout, Cin) @ x[n] (Cin, positions): the NCHW input and output are that product's operand and
    # result as they are; the CUDA plan keeps its direct convolution kernel
    cuda, tri = plans(load_problem(FIXTURES / "conv1x1.py"))
    assert [f.group.kind for f in cuda.fused] == ["conv"]
    (g,) = [f.group for f in tri.fused]
    assert g.kind == "mm" and (g.gemm.batch, g.gemm.m, g.gemm.n, g.gemm.k) == (3, 12, 35, 8)
    assert not g.gemm.a_batched and g.gemm.b_batched
    src = tri.source()
    assert "a1 = a1.reshape(3, 8, 35)" in src and "out = torch.empty((3, 12, 5, 7)" in src


def test_a_deep_product_gets_both_operands_k_contiguous_and_a_shallow_one_as_they_are():
    # Hopper's tensor cores read 32-bit operands K-major: from K = 256 on the launcher copies a transposed A and
    # a row-major B into K-contiguous memory (no copy when they are already), never an activation as large as a
    # 1x1 convolution's input
    deep = _triton_plan("matmul_deep").source()
    assert "a0 = a0.contiguous()" in deep and "a1 = a1.mT.contiguous().mT" in deep
    for name in ("only_matmul", "bmm", "conv1x1"):  # K of 8, 33, 8
        src = _triton_plan(name).source()
        assert "mT.contiguous()" not in src and "a0 = a0.contiguous()" not in src, name


def test_a_product_before_a_row_kernel_is_a_bare_triton_product():
    p = _triton_plan("linear_gelu_softmax")
    assert [f.group.kind for f in p.fused] == ["mm", "fused"]
    assert p.fused[0].nodes[0].name == "fc" and p.fused[1].group.leaves[0].name == "fc"  # the row kernel reads it
    src = p.source()
    assert "import cupy as cp" in src and "import triton.language as tl" in src


def test_tiles_stay_within_registers_shared_memory_and_the_product():
    plan = _triton_plan("bmm")
    g = plan.fused[0].group  # 70 x 65, K = 33
    rng = random.Random(0)
    p = legal(plan.defaults()[0], g)
    for _ in range(40):
        p = mutate(p, g, rng)
        assert p.tile_m <= 128 and p.tile_n <= 128  # no tile beyond the next power of two of the product
        assert p.tile_m * p.tile_n // (32 * p.warps) <= 128
        assert 4 * p.stages * p.tile_k * (p.tile_m + p.tile_n) <= 200 * 1024
        assert p.precision in ("tf32x3", "ieee")


def test_a_four_d_by_two_d_product_is_one_triton_product_over_the_flattened_rows():
    p = _triton_plan("einsum_4d")  # KernelBench L1 11's einsum: the CUDA plan's own GEMM read 0.54x eager
    (f,) = p.fused
    assert f.group.kind == "mm" and (f.group.gemm.m, f.group.gemm.n, f.group.gemm.k) == (30, 24, 16)
    assert f.group.out_shape == (2, 3, 5, 24) and "a0 = a0.reshape(30, 16)" in p.source()


def test_a_bare_product_with_few_tiles_and_a_long_k_cuts_k_into_slices():
    # KernelBench L1 4 (2048 x 1M by 1M x 1) ran in 16 programs on the H100's 132 SMs: 0.13x eager
    mv = _triton_plan("matvec")
    (g,) = [f.group for f in mv.fused]
    (p,) = mv.legalize(mv.defaults())
    assert p.split_k == 16  # one 64 x 32 tile: two programs per SM would want 264, K = 4096 allows 16 slices of 8 steps
    src = mv.source()
    assert "tl.atomic_add(" in src and "SPLIT_K=16" in src and "torch.zeros((64, 1)" in src
    rng = random.Random(0)
    for _ in range(40):  # a mutation never slices K below 8 steps of tile_k a slice
        p = mutate(p, g, rng)
        assert p.split_k in (1, 2, 4, 8, 16, 32, 64) and -(-4096 // p.tile_k) >= 8 * p.split_k
    lin = _triton_plan("linear_long_k")  # a bare product with a bias, before a row kernel: sliced too
    assert lin.legalize(lin.defaults())[0].split_k == 16 and "(ks == 0)" in lin.source()
    for name in ("gemm_batchnorm", "only_matmul"):  # an epilogue, or a K of one step: never sliced
        plan = _triton_plan(name)
        assert all(q.split_k == 1 for q in plan.legalize(plan.defaults())) and "atomic_add" not in plan.source()
        g0 = plan.fused[0].group
        assert legal(replace(plan.defaults()[0], split_k=8), g0).split_k == 1


def test_an_epilogue_over_the_product_alone_is_never_cut_into_k_slices():
    # KernelBench L2 59 on the H100: Linear, x * sigmoid(x), * 2.0 has one leaf (the product; the scale is a
    # constant) and few tiles, and was cut into K slices that summed the bare product into the output,
    # the epilogue dropped: max error 0.43 against float64
    plan = _triton_plan("linear_swish_scale")
    (g,) = [f.group for f in plan.fused]
    assert len(g.leaves) == 1 and not bare_product(g)
    (p,) = plan.legalize(plan.defaults())
    assert p.split_k == 1 and "atomic_add" not in plan.source() and "sigmoid" in plan.source()
    assert legal(replace(p, split_k=8), g).split_k == 1
    rng = random.Random(0)
    for _ in range(40):
        p = mutate(replace(p, split_k=8), g, rng)
        assert p.split_k == 1


def test_a_sliced_product_with_an_epilogue_is_refused_by_the_kernel_writer():
    g = _triton_plan("linear_swish_scale").fused[0].group
    with pytest.raises(ValueError, match="epilogue"):
        kernel_source("kv_mm_0", g, replace(legal(KernelParams(), g), split_k=4))


def test_sliced_products_match_the_module_under_the_interpreter():
    for split in (None, "--split=1", "--split=4"):
        errs = triton_check(*([split] if split else []), "matvec", "linear_long_k")
        # Against eager, itself fp32: on this draw eager's own max error against float64 is 9.2e-5 (|y| up to
        # 136, 4096 products of unit normals), so two correct fp32 sums may differ by twice that; the
        # K-contiguous launcher (6367ddf) summed in another order and read 1.07e-4 with one slice. The
        # evaluator allows 8x eager's error: 2e-4 here is still fp32's error, not a loose bound.
        assert errs["matvec"][0] < 2e-4 and errs["linear_long_k"][0] < 1e-6, (split, errs)
    assert triton_check("--compile", "matvec") == {"matvec": ["wgmma", "fma"]}  # tf32x3, then ieee


def _verdict(got: Generated, problem_id: str) -> Evaluation:
    """The Triton variant is faster and reports its roofline; CUDA candidates are slower."""
    tri = got.choice.technique == "triton_mm"
    ms = 0.5 if tri else 0.9
    t = lambda v: TimingStats(median_ms=v, mean_ms=v, min_ms=v, max_ms=v, iqr_ms=0.0, trials=5, method="fake")  # noqa: E731
    return Evaluation(candidate_id="c", problem_id=problem_id, outcome=Outcome.OK, reason="ok", timing=t(ms),
                      ref_timing=t(1.0), wall_s=2.0, profile=Profile(roofline_fraction=0.95 if tri else 0.3))


def test_search_tries_every_variant_and_stops_at_the_roofline():
    ps = plans(load_problem(FIXTURES / "gemm_batchnorm.py"))
    res = search(ps, lambda got: _verdict(got, ps[0].problem.id), budget=8)
    assert [t.technique for t in res.trials] == ["cuda", "triton_mm"]
    assert res.best.technique == "triton_mm" and res.stopped == "roofline"


def test_a_library_call_at_its_roofline_does_not_stop_the_search_before_the_triton_variant():
    """H100: cuBLAS + epilogue read 99 % of the fp32 roof on every level-2 GEMM and the search stopped
    there; the TF32x3 variant can be faster than that roof, so it must run once."""
    ps = plans(load_problem(FIXTURES / "gemm_batchnorm.py"))

    def at_roof(got: Generated) -> Evaluation:
        ev = _verdict(got, ps[0].problem.id)
        return ev.model_copy(update={"profile": Profile(roofline_fraction=0.99)})

    res = search(ps, at_roof, budget=8)
    assert [t.technique for t in res.trials] == ["cuda", "triton_mm"] and res.stopped == "roofline"


def test_a_fraction_far_above_the_roof_does_not_stop_the_search():
    """H100 level-2 sample: cuDNN's TF32 convolutions read 130-230 % of the fp32 compute roof and the search
    stopped after one candidate; such a fraction says the roof is wrong, so the budget decides."""
    ps = plans(load_problem(FIXTURES / "gemm_batchnorm.py"))

    def above(got: Generated) -> Evaluation:
        ev = _verdict(got, ps[0].problem.id)
        return ev.model_copy(update={"profile": Profile(roofline_fraction=1.66)})

    res = search(ps, above, budget=4)
    assert len(res.trials) == 4 and res.stopped == "budget"


def test_search_stops_at_its_gpu_seconds():
    ps = plans(load_problem(FIXTURES / "gemm_batchnorm.py"))
    res = search(ps, lambda got: _verdict(got, ps[0].problem.id), budget=8, gpu_seconds=5.0, roofline=2.0)
    assert len(res.trials) == 3 and res.stopped == "gpu_seconds" and res.gpu_seconds == 6.0


def test_offline_proposer_translates_each_variant_then_mutates_within_the_parents_variant():
    prop = OfflineGenerator(load_problem(FIXTURES / "gemm_batchnorm.py"))
    first, second = prop.choose([]), prop.choose([])
    assert (first[0].technique, second[0].technique) == ("cuda", "triton_mm")
    parent = second[0].generate(second[1]).choice
    child_plan, child = prop.choose([parent])
    assert child_plan.technique == "triton_mm" and child != second[1]
