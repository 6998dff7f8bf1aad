"""error_stats with buffers reused across chunks (2026-11-28) gives what the per-operation version gave: the same
maxima and far counts exactly, the same sums of squares to float64 rounding, NaN and infinity carried the same way,
the mask honoured, and neither the candidate's output nor the truth written."""

from __future__ import annotations

import pytest
import torch

from kevolve.sandbox.judge.correctness import RHO, error_stats, tiny


def _per_operation(x: torch.Tensor, t: torch.Tensor, mask: torch.Tensor | None, chunk: int) -> list[float]:
    """The version before 2026-11-28, a temporary per operation: the reference these numbers must match."""
    alpha = tiny(x.dtype)
    x, t = x.reshape(-1), t.reshape(-1)
    m = mask.reshape(-1) if mask is not None else None
    acc = torch.zeros(5, dtype=torch.float64)
    for s in range(0, t.numel(), chunk):
        tc, xc = t[s:s + chunk].double(), x[s:s + chunk].double()
        d = xc - tc
        if m is not None:
            mc = m[s:s + chunk]
            tc, d = torch.where(mc, tc, 0.0), torch.where(mc, d, 0.0)
        far = (d.abs() > RHO * tc.abs() + alpha).sum().double()
        part = torch.stack([tc.abs().max(), tc.square().sum(), d.abs().max(), d.square().sum(), far])
        acc = torch.stack([torch.maximum(acc[0], part[0]), acc[1] + part[1],
                           torch.maximum(acc[2], part[2]), acc[3] + part[3], acc[4] + part[4]])
    scale_inf, sq_t, e_inf, sq_d, far_n = acc.tolist()
    s2, e2 = sq_t ** 0.5, sq_d ** 0.5
    return [e_inf / scale_inf if scale_inf else e_inf, e2 / s2 if s2 else e2, far_n]


def _same(got: tuple[float, float, float], want: list[float]) -> bool:
    inf_ok = (got[0] != got[0] and want[0] != want[0]) or got[0] == want[0]
    two_ok = (got[1] != got[1] and want[1] != want[1]) or got[1] == pytest.approx(want[1], rel=1e-12, abs=0)
    return inf_ok and two_ok and got[2] == want[2]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("chunk", [7, 64, 1 << 24])
def test_reused_buffers_give_the_per_operation_numbers(dtype: torch.dtype, chunk: int) -> None:
    g = torch.Generator().manual_seed(7)
    for case in range(12):
        n = int(torch.randint(1, 300, (1,), generator=g))
        t64 = torch.randn(n, dtype=torch.float64, generator=g) * 10 ** float(torch.randint(-3, 4, (1,), generator=g))
        if case % 3 == 0:
            t64[::5] = 0.0
        if case % 4 == 1:
            t64[1::7] = float("inf")
        t = t64 if case % 2 else t64.to(dtype)  # the truth in float64, or rounded to the output's dtype
        x = (t64 + torch.randn(n, dtype=torch.float64, generator=g) * 1e-3).to(dtype)
        if case % 5 == 2:
            x[n // 2] = float("nan")
        if case % 6 == 3:
            x[: n // 3] *= 3.0  # far elements
        mask = torch.isfinite(t) if case % 4 == 1 or case % 3 == 2 else None
        t0, x0 = t.clone(), x.clone()
        got = error_stats(x, t, mask, chunk)
        assert _same(got, _per_operation(x, t, mask, chunk)), (dtype, chunk, case, got)
        assert torch.equal(t.nan_to_num(), t0.nan_to_num()) and torch.equal(x.nan_to_num(), x0.nan_to_num())


def test_far_elements_are_counted_exactly_across_chunk_ends() -> None:
    t = torch.ones(100, dtype=torch.float64)
    x = t.clone().float()
    x[[0, 6, 7, 13, 99]] = 1.6  # off by 0.6 of their own value: far (RHO 0.5); 1.4 would not be
    x[50] = 1.4
    assert error_stats(x, t, None, chunk=7)[2] == 5.0
    assert error_stats(x, t, torch.arange(100) != 99, chunk=7)[2] == 4.0
