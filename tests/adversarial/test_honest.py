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
