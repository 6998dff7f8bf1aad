"""The judge's comparison of one output with its truth in one pass over the GPU's memory (Triton).

`correctness.compare_one` asks, for every call, whether the output holds the harness's poison, whether
its NaN and infinities sit where the truth's do, and its max and 2-norm errors against the truth.
Done with torch ops, that is a dozen passes and float64 copies per output: on the H100, KernelBench
level 1's 6.4 GB outputs made the comparisons 8.4 s of a 12 s evaluation. Here one kernel reads the
output and the truth once each and leaves, per block, the poison count, the count of non-finite
mismatches, max|t|, sum t^2, max|d| and sum d^2 (float64) and the count of far elements
(|d| > RHO |t| + the dtype's smallest normal: correctness.py); the host reduces those few numbers.

The same decisions as the torch path (tests compare the two, on the GPU and in Triton's interpreter);
any dtype, layout or device it does not handle, or Triton missing, goes the torch way.

Only outputs of MIN_ELEMENTS or more: the kernel's build is paid in every judge process (Triton's cache is the
judge's scratch), 2.5-3.2 s on the H100 for its first call, and it saves ~0.13 ms per million elements a call
(1M: 0.51 against 1.54 ms; 16M: 0.58 / 2.69; 268M: 2.41 / 36.0; scripts/bench_compare.py, 2026-11-28). Used on
every output it was 2.8 of a cold ReLU evaluation's 6.5 s in the judge (0.4 s with torch ops). From 2^28 elements
on (1 GiB of float32) ~70 checked calls repay it; KernelBench level 1's 6.4 GB outputs gain 0.2 s a call.
KEVOLVE_FUSED_COMPARE=0 switches it off, =all on at every size (side-by-side measurements).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from kevolve.sandbox.common.harness import POISON_BITS

RHO = 0.5  # correctness.RHO (correctness imports this module)

BLOCK = 4096
MIN_ELEMENTS = 1 << 28
_kernel: Any = None
_broken: str | None = None  # why the kernel could not be built here (then the torch path)


def _build() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def compare_kernel(c_ptr, t_ptr, part_f, part_i, part_p, n, poison, INT: tl.constexpr, BLOCK: tl.constexpr,
                       PRINT: tl.constexpr, TINY: tl.constexpr, RHO: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        c = tl.load(c_ptr + offs, mask=m, other=0.0)
        t = tl.load(t_ptr + offs, mask=m, other=0.0)
        pois = m & (c.to(INT, bitcast=True) == poison)
        cd = c.to(tl.float64)
        td = t.to(tl.float64)
        fin_c = tl.abs(cd) <= 1.7976931348623157e308  # false for NaN and for either infinity
        fin_t = tl.abs(td) <= 1.7976931348623157e308
        nan_c, nan_t = cd != cd, td != td
        pinf_c, pinf_t = cd > 1.7976931348623157e308, td > 1.7976931348623157e308
        bad = m & ((fin_c != fin_t) | ((~fin_t) & ((nan_c != nan_t) | (pinf_c != pinf_t))))
        both = m & fin_t & fin_c
        tz = tl.where(both, td, 0.0)
        dz = tl.where(both, cd - td, 0.0)
        tl.store(part_f + pid * 4 + 0, tl.max(tl.abs(tz), axis=0))
        tl.store(part_f + pid * 4 + 1, tl.sum(tz * tz, axis=0))
        tl.store(part_f + pid * 4 + 2, tl.max(tl.abs(dz), axis=0))
        tl.store(part_f + pid * 4 + 3, tl.sum(dz * dz, axis=0))
        far = both & (tl.abs(dz) > RHO * tl.abs(tz) + TINY)
        tl.store(part_i + pid * 3 + 0, tl.sum(pois.to(tl.int32), axis=0))
        tl.store(part_i + pid * 3 + 1, tl.sum(bad.to(tl.int32), axis=0))
        tl.store(part_i + pid * 3 + 2, tl.sum(far.to(tl.int32), axis=0))
        if PRINT:  # checks.fingerprint's sums over the output's 32-bit words, from the same load
            w = tl.where(m, c.to(tl.int32, bitcast=True).to(tl.int64), 0)
            tl.store(part_p + pid * 2 + 0, tl.sum(w, axis=0))
            tl.store(part_p + pid * 2 + 1, tl.sum(tl.where(offs % 7 == 0, w, 0), axis=0))

    return compare_kernel


def enabled() -> bool:
    return os.environ.get("KEVOLVE_FUSED_COMPARE", "1") != "0"


def min_elements() -> int:
    return 0 if os.environ.get("KEVOLVE_FUSED_COMPARE") == "all" else MIN_ELEMENTS


def run_kernel(c: torch.Tensor, t: torch.Tensor, prints: list[tuple[int, ...]] | None = None
               ) -> tuple[int, int, float, float, float, float, int]:
    """(poison count, non-finite mismatches, max|t|, sum t^2, max|d|, sum d^2, far count), the last five over
    the elements where both are finite. `c` and `t` contiguous, same dtype and shape, same device.
    With `prints` and 4-byte elements, `checks.fingerprint`'s tuple for `c` is appended to it."""
    global _kernel
    if _kernel is None:
        _kernel = _build()
    import triton
    import triton.language as tl

    n = c.numel()
    progs = triton.cdiv(n, BLOCK)
    part_f = torch.empty(progs * 4, dtype=torch.float64, device=c.device)
    part_i = torch.empty(progs * 3, dtype=torch.int32, device=c.device)  # per block: at most BLOCK
    int_dtype, bits = POISON_BITS[c.dtype]
    width = 8 * c.element_size()
    pattern = bits - (1 << width) if bits >= 1 << (width - 1) else bits
    tl_int = {torch.int16: tl.int16, torch.int32: tl.int32, torch.int64: tl.int64}[int_dtype]
    want = prints is not None and c.element_size() == 4
    part_p = torch.empty(progs * 2 if want else 1, dtype=torch.int64, device=c.device)
    _kernel[(progs,)](c.reshape(-1), t.reshape(-1), part_f, part_i, part_p, n, pattern, INT=tl_int, BLOCK=BLOCK,
                      PRINT=want, TINY=torch.finfo(c.dtype).tiny, RHO=RHO)
    f, i = part_f.view(progs, 4), part_i.view(progs, 3).to(torch.int64)
    out = torch.stack([f[:, 0].max(), f[:, 1].sum(), f[:, 2].max(), f[:, 3].sum(),
                       i[:, 0].sum().double(), i[:, 1].sum().double(), i[:, 2].sum().double()]).tolist()  # one sync
    if want and prints is not None:  # integer sums: equal to fingerprint's in any order (both wrap alike)
        words = part_p.view(progs, 2).sum(dim=0)
        last = c.reshape(-1)[-1:].view(torch.int32)
        prints.append((n, *torch.cat([words, last.to(torch.int64)]).tolist()))
    return int(out[4]), int(out[5]), out[0], out[1], out[2], out[3], int(out[6])


def stats(c: torch.Tensor, t: torch.Tensor, prints: list[tuple[int, ...]] | None = None
          ) -> tuple[int, int, float, float, float, float, int] | None:
    """run_kernel's numbers, or None where the torch path must do it (CPU, a dtype without a poison
    pattern, a non-contiguous, empty or small tensor, Triton unusable here, switched off)."""
    global _broken
    if (_broken is not None or not enabled() or not c.is_cuda or c.dtype not in POISON_BITS or c.dtype != t.dtype
            or c.device != t.device or not c.numel() or c.numel() < min_elements()
            or not (c.is_contiguous() and t.is_contiguous())):
        return None
    try:
        return run_kernel(c, t, prints)
    except Exception as e:  # noqa: BLE001 - no Triton, or it cannot build here: the torch path
        _broken = f"{type(e).__name__}: {e}"[:200]
        return None


__all__ = ["BLOCK", "MIN_ELEMENTS", "enabled", "min_elements", "run_kernel", "stats"]
