"""The tolerance rule (sandbox/judge/correctness.py) on hand-built tensors: the two error norms, and where
`compare_one` draws the line (factor x eager's own error + the dtype's floor, both norms)."""

from __future__ import annotations

import math

import pytest
import torch

from kevolve.sandbox.judge.correctness import FLOORS, NEAR_MISS, compare_one, rel_errors
from kevolve.sandbox.common.harness import POISON_BITS


def test_rel_errors_are_the_max_norm_and_the_2_norm_relative_to_the_truth() -> None:
    t = torch.tensor([1.0, 2.0, 3.0, 5.0])
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert rel_errors(x, t) == pytest.approx((1 / 5, 1 / math.sqrt(39)))


def test_rel_errors_leave_out_masked_elements_from_the_error_and_the_scale() -> None:
    t = torch.tensor([1.0, math.inf, 2.0, 100.0])
    x = torch.tensor([1.5, math.inf, 2.0, 0.0])
    mask = torch.tensor([True, False, True, False])
    assert rel_errors(x, t, mask) == pytest.approx((0.5 / 2, 0.5 / math.sqrt(5)))


def test_rel_errors_against_an_all_zero_truth_are_absolute() -> None:
    assert rel_errors(torch.tensor([0.0, 3.0, -4.0]), torch.zeros(3)) == pytest.approx((4.0, 5.0))
    assert rel_errors(torch.zeros(0), torch.zeros(0)) == (0.0, 0.0)


def test_rel_errors_are_computed_in_float64() -> None:
    # 1e20 squared overflows float32: a float32 2-norm would be inf / inf
    t = torch.full((4,), 1e20, dtype=torch.float32)
    assert rel_errors(t * 2, t) == pytest.approx((1.0, 1.0))
    big = torch.tensor([16777216.0])  # 2**24: float32's next value is 2 away
    assert rel_errors(big + 2, big) == (2 / 2**24, 2 / 2**24)


@pytest.mark.parametrize("chunk", [1, 3, 7, 1000])
def test_rel_errors_do_not_depend_on_the_chunk_size(chunk: int) -> None:
    g = torch.Generator().manual_seed(3)
    t, x = torch.randn(5, 50, generator=g), torch.randn(5, 50, generator=g)
    mask = torch.rand(5, 50, generator=g) > 0.3
    for m in (None, mask):
        assert rel_errors(x, t, m, chunk=chunk) == pytest.approx(rel_errors(x, t, m), rel=1e-12)


def one(c: torch.Tensor, t: torch.Tensor, eager: tuple[float, float] = (0.0, 0.0), factor: float = 8.0):  # noqa: ANN201
    return compare_one("d0", [c], [t], (eager,), factor)


def test_an_error_within_factor_times_eager_plus_the_floor_passes_on_both_norms() -> None:
    t = torch.ones(100)
    eager = (1e-4, 1e-5)  # allowed: max 8.1e-4, rms 9e-5
    c = t.clone()
    c[0] += 7e-4  # max 7e-4, rms 7e-5
    check, miss = one(c, t, eager)
    assert check.passed and miss is None and check.name == "correct:d0"


def test_the_max_norm_alone_fails_a_single_far_element() -> None:
    t, c = torch.ones(100), torch.ones(100)
    c[0] += 8.5e-4  # max 8.5e-4 > 8.1e-4; rms 8.5e-5 < 9e-5
    check, miss = one(c, t, (1e-4, 1e-5))
    assert not check.passed and miss is not None and miss.kind == "value" and "output 0" in miss.detail
    assert miss.err == pytest.approx(8.5e-5, rel=1e-3)  # the rms error: what the near-miss rule reads


def test_the_2_norm_alone_fails_a_small_error_everywhere() -> None:
    t = torch.ones(100)
    check, miss = one(t + 1e-4, t, (1e-4, 1e-5))  # max 1e-4 < 8.1e-4; rms 1e-4 > 9e-5
    assert not check.passed and miss is not None and miss.kind == "value"


def test_the_factor_scales_what_eager_itself_gets_wrong() -> None:
    t = torch.ones(100)
    c = t + 2e-4
    assert not one(c, t, (1e-4, 1e-4), factor=1.0)[0].passed
    assert one(c, t, (1e-4, 1e-4), factor=2.0)[0].passed


def test_an_exact_op_gets_the_dtypes_floor_and_no_more() -> None:
    t = torch.ones(4, dtype=torch.float16)
    ulp = 2.0 ** -10
    assert FLOORS[torch.float16] == 2e-3
    assert one(t + 2 * ulp, t)[0].passed  # 1.95e-3
    assert not one(t + 3 * ulp, t)[0].passed  # 2.93e-3
    t32 = torch.ones(4)
    assert one(t32 + 5e-6, t32)[0].passed and not one(t32 + 2e-5, t32)[0].passed


def test_bf16_arithmetic_on_a_float32_problem_fails_as_a_near_miss() -> None:
    t = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    check, miss = one(t.to(torch.bfloat16).to(torch.float32), t)
    assert not check.passed and miss is not None and miss.kind == "value" and 1e-5 < miss.err < NEAR_MISS


def test_an_output_without_an_eager_error_is_held_to_the_floor() -> None:
    t = torch.ones(4)
    assert compare_one("d0", [t + 5e-6], [t], (), 8.0)[0].passed
    assert not compare_one("d0", [t + 2e-5], [t], (), 8.0)[0].passed


def test_count_shape_and_dtype_are_checked_before_values() -> None:
    t = torch.ones(4)
    assert one(t, t)[0].passed
    assert compare_one("d0", [t, t], [t], (), 8.0)[1].kind == "count"
    assert one(torch.ones(2, 2), t)[1].kind == "shape"
    assert one(torch.ones(4, dtype=torch.float64), t)[1].kind == "shape"


def test_memory_holding_the_poison_pattern_fails_even_where_no_value_is_compared() -> None:
    int_dtype, bits = POISON_BITS[torch.float32]
    c = torch.full((4,), bits, dtype=int_dtype).view(torch.float32)  # a NaN with the harness's payload
    t = torch.full((4,), math.nan)
    assert one(c, t)[1].kind == "poison"
    assert one(torch.full((4,), math.nan), t)[0].passed  # an ordinary NaN where the truth has one


def test_non_finite_values_must_sit_where_the_truths_are() -> None:
    t = torch.tensor([1.0, math.inf, math.nan])
    assert one(t.clone(), t)[0].passed
    assert one(torch.tensor([math.nan, math.inf, math.nan]), t)[1].kind == "nonfinite"
    assert one(torch.tensor([1.0, math.nan, math.nan]), t)[1].kind == "nonfinite"
    assert one(torch.tensor([1.0, math.inf, 5.0]), t)[1].kind == "nonfinite"


def test_integer_outputs_must_be_equal() -> None:
    t = torch.arange(6, dtype=torch.int64)
    assert one(t.clone(), t)[0].passed
    c = t.clone()
    c[2] += 1
    check, miss = one(c, t)
    assert miss is not None and miss.kind == "value" and "1 of 6 elements differ" in miss.detail


def test_an_infinity_of_the_wrong_sign_is_nonfinite() -> None:
    t = torch.tensor([1.0, math.inf, -math.inf])
    assert one(torch.tensor([1.0, -math.inf, -math.inf]), t)[1].kind == "nonfinite"
    assert one(torch.tensor([1.0, math.inf, math.inf]), t)[1].kind == "nonfinite"
    assert one(torch.tensor([1.0, math.inf, -math.inf]), t)[1] is None
