"""Honest C++ solutions of different problems are accepted: the checks do not reject real work."""

from __future__ import annotations

from pathlib import Path

import pytest

SOLUTIONS = Path(__file__).parent.parent / "fixtures" / "solutions"


@pytest.mark.parametrize("problem", ["relu", "gelu_bias", "softmax", "linear_relu"])
def test_honest_cpp_solution_is_accepted(evaluate, problem: str) -> None:  # noqa: ANN001
    ev = evaluate(problem, SOLUTIONS / f"{problem}_cpp.py")
    assert ev.ok, ev.reason
    assert ev.speedup is not None and ev.timing is not None and ev.ref_timing is not None
    assert ev.profile is not None and any(k.custom for k in ev.profile.kernels)
    assert all(c.passed for c in ev.checks)


def test_output_buffer_reused_across_calls_is_not_mistaken_for_a_cache(evaluate) -> None:  # noqa: ANN001
    ev = evaluate("relu", SOLUTIONS / "relu_reused_buffer.py", allow_torch_only=True)
    assert ev.ok, ev.reason
