"""Honest C++ solutions of different problems are accepted: the checks do not reject real work."""

from __future__ import annotations

from pathlib import Path

import pytest

SOLUTIONS = Path(__file__).parent.parent / "fixtures" / "solutions"


@pytest.mark.parametrize("problem", ["relu", "gelu_bias", "softmax", "linear_relu"])
def test_honest_cpp_solution_is_accepted(evaluate, problem: str) -> None:  # noqa: ANN001
    # the default policy: its text scan, and the symbol check of the built module before it is loaded
    ev = evaluate(problem, SOLUTIONS / f"{problem}_cpp.py", policy_allow=())
    assert ev.ok, ev.reason
    assert ev.speedup is not None and ev.timing is not None and ev.ref_timing is not None
    assert ev.profile is not None and any(k.custom for k in ev.profile.kernels)
    assert all(c.passed for c in ev.checks)


def test_output_buffer_reused_across_calls_is_not_mistaken_for_a_cache(evaluate) -> None:  # noqa: ANN001
    ev = evaluate("relu", SOLUTIONS / "relu_reused_buffer.py", allow_torch_only=True)
    assert ev.ok, ev.reason


UNUSUAL = {"unusual_noncontiguous": "relu", "unusual_float64_inside": "softmax", "unusual_openmp": "relu",
           "unusual_numpy_output": "relu", "unusual_init_precompute": "linear_relu",
           "unusual_kept_output_buffer": "gelu_bias"}


@pytest.fixture(scope="module")
def unusual_built():  # noqa: ANN201
    """The four candidates share one extension: the build service compiles it once, without running them."""
    from testpaths import BUILD_CACHE

    from kevolve.sandbox.build.service import BuildService
    from kevolve.sandbox.build.recipe import BuildTarget

    service = BuildService(BUILD_CACHE, BuildTarget.current(""), workers=1)
    try:
        results = [f.result() for f in service.submit_source((SOLUTIONS / "unusual_openmp.py").read_text())]
    finally:
        service.close()
    assert results and all(r.ok for r in results), [r.log_tail[-500:] for r in results]
    return results


@pytest.mark.parametrize("name", sorted(UNUSUAL))
def test_honest_candidates_of_unusual_shape_are_accepted(evaluate, unusual_built, name: str) -> None:  # noqa: ANN001
    """Non-contiguous output, float64 inside, OpenMP, a NumPy-backed output, weights precomputed in __init__, an
    output buffer kept on the module: none is a reason to reject."""
    ev = evaluate(UNUSUAL[name], SOLUTIONS / f"{name}.py", policy_allow=())  # the default policy passes them too
    assert ev.ok, ev.reason + ev.log_tail[-1500:]
    assert ev.profile is not None and any(k.custom for k in ev.profile.kernels)


def test_a_kernel_that_relies_on_the_inputs_zero_structure_is_accepted(evaluate) -> None:  # noqa: ANN001
    """KernelBench L1 15's inputs are lower triangular by get_inputs(); a kernel that skips the zero half is right on
    every input the problem can make. The shifted draws keep that structure (the standard normal one puts its values
    where get_inputs() put values): on full normal matrices it was `off_distribution` (two leaderboard kernels, H200)."""
    ev = evaluate("tril_matmul", SOLUTIONS / "tril_matmul_structured.py", allow_torch_only=True)
    assert ev.ok, ev.reason
    assert all(c.passed for c in ev.checks)


def test_the_standard_normal_draw_keeps_get_inputs_zeros_and_nothing_else() -> None:
    """The shifted 'normal' draw: new values wherever get_inputs() made a value (so a kernel that hard-codes the
    value range is still caught), exact zeros where it made zeros."""
    import importlib.util

    import torch

    from kevolve.sandbox.common.harness import draw_inputs
    from kevolve.sandbox.common.protocol import Draw

    spec = importlib.util.spec_from_file_location("tril_matmul", SOLUTIONS.parent / "problems" / "tril_matmul.py")
    problem = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(problem)
    plain = draw_inputs(problem, Draw(key="n", seed=7), torch.device("cpu"))
    normal = draw_inputs(problem, Draw(key="n", seed=7, transform="normal"), torch.device("cpu"))
    for p, n in zip(plain, normal, strict=True):
        assert torch.equal(p == 0, n == 0)  # the triangle's zeros, and only they
        assert torch.equal(n, n.tril()) and not torch.equal(n, p)
        assert 0.9 < float(n[n != 0].std()) < 1.1
