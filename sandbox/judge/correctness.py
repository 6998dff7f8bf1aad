"""Compare a candidate's outputs with the truth (the judge calls it for every call, `checks.py`).

Tolerance (documented in docs/VERIFICATION.md): the reference is computed once more in float64
(`truth`, handed over rounded to the output dtype: half an ulp, far below any tolerance). For
every draw the candidate may be off from the truth by `factor` times eager PyTorch's
own error plus a small per-dtype floor, measured two ways (max-norm and 2-norm, both relative to the
truth's scale). Eager's error is the yardstick because it is what PyTorch itself does on this device
(TF32 convolutions included); the floor keeps exact ops (ReLU: eager error 0) from demanding
bit-equality. With factor 8 and a float32 floor of 1e-5, bf16 (~4e-3) and fp16 (~5e-4) arithmetic
fail on float32 problems.

Both norms are relative to the whole tensor's scale, so alone they never look at an element below ~1e-5 of
its largest: red team 5 zeroed half of a wide-range exp and all but 112 of cumprod's 4,000 columns and got `ok`.
So each element is also checked on its own: it is *far* when it is off by more than half its own value
(|c - t| > RHO |t| + the dtype's smallest normal, below which values are underflow). A candidate may have
`factor` times eager's own count of far elements plus 1/1024 of the elements plus 8: eager's count covers
the elements cancellation leaves near zero (they are far for any summation order), the slack a candidate
whose error the norms allow (a normwise error e makes the elements below ~2e of the scale far).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kevolve.records import CheckResult
from kevolve.sandbox.judge import fused_compare
from kevolve.sandbox.common.harness import POISON_BITS

FLOORS = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
NEAR_MISS = 3e-2  # a normwise error under this, yet over tolerance, is a precision shortcut
RHO = fused_compare.RHO  # an element off by more than this share of its own value is far (0.5)
FAR_SHARE, FAR_MIN = 1 / 1024, 8  # far elements a candidate may have beyond `factor` x eager's


def tiny(dtype: torch.dtype) -> float:
    """The smallest normal value of a floating dtype: below it an element is underflow, never far."""
    return torch.finfo(dtype).tiny if dtype.is_floating_point else 0.0


def far_allowed(n: int, eager_far: float, factor: float) -> float:
    """How many of an output's `n` elements may be far, given eager's own count on the same draw."""
    return factor * eager_far + n * FAR_SHARE + FAR_MIN


@dataclass(frozen=True)
class Mismatch:
    key: str
    kind: str  # "shape", "poison", "nonfinite", "value", "elements", "count"
    detail: str
    err: float = float("inf")


_CHUNK = 1 << 24  # elements per step: a 6 GB output is compared without a 12 GB float64 copy


def rel_errors(x: torch.Tensor, t: torch.Tensor, mask: torch.Tensor | None = None,
               chunk: int = _CHUNK) -> tuple[float, float]:
    """(max|x-t| / max|t|, ||x-t|| / ||t||) over the elements where `mask` holds (all if None);
    the absolute errors where the truth is all zero."""
    inf, two, _ = error_stats(x, t, mask, chunk)
    return inf, two


def error_stats(x: torch.Tensor, t: torch.Tensor, mask: torch.Tensor | None = None,
                chunk: int = _CHUNK) -> tuple[float, float, float]:
    """`rel_errors`' two numbers and the count of far elements (|x-t| > RHO |t| + tiny(x.dtype)).

    Computed in float64, `chunk` elements at a time, so the memory it needs does not grow with the
    output (KernelBench level 1 has 6.4 GB outputs); one host sync at the end."""
    alpha = tiny(x.dtype)
    x, t = x.reshape(-1), t.reshape(-1)
    m = mask.reshape(-1) if mask is not None else None
    # Three buffers reused by every chunk, reductions that make no temporary, nothing written into x or t: a fresh
    # float64 temporary per operation made a CPU judge's float64 truth of a 100 MB ReLU stand-in of KernelBench L1 19
    # take 34 of its 38 s in page faults (2026-11-28); the same sums, maxima and far count as before.
    size = min(chunk, t.numel())
    d_buf = torch.empty(size, dtype=torch.float64, device=t.device)
    a_buf = torch.empty_like(d_buf)
    b_buf = torch.empty(size, dtype=torch.bool, device=t.device)
    # max|t|, sum t^2, max|d|, sum d^2, far count
    acc = torch.zeros(5, dtype=torch.float64, device=t.device)
    for s in range(0, t.numel(), chunk):
        tc = t[s:s + chunk].double()  # t itself when it is float64: read, never written
        n = tc.numel()
        d, ta, b = d_buf[:n], a_buf[:n], b_buf[:n]
        torch.sub(x[s:s + chunk], tc, out=d)  # float64: tc is
        torch.abs(tc, out=ta)
        if m is not None:
            torch.logical_not(m[s:s + chunk], out=b)
            d.masked_fill_(b, 0.0)
            ta.masked_fill_(b, 0.0)
        d.abs_()
        part_t = torch.stack([ta.max(), torch.dot(ta, ta), d.max(), torch.dot(d, d)])
        ta.mul_(RHO).add_(alpha)  # RHO |t| + tiny, in the order the element rule reads
        torch.gt(d, ta, out=b)
        far = b.sum().double()
        acc = torch.stack([torch.maximum(acc[0], part_t[0]), acc[1] + part_t[1],
                           torch.maximum(acc[2], part_t[2]), acc[3] + part_t[3], acc[4] + far])
    scale_inf, sq_t, e_inf, sq_d, far_n = acc.tolist()
    return (*_relative(scale_inf, sq_t, e_inf, sq_d), far_n)


def _relative(scale_inf: float, sq_t: float, e_inf: float, sq_d: float) -> tuple[float, float]:
    scale_2, e_2 = sq_t ** 0.5, sq_d ** 0.5
    return (e_inf / scale_inf if scale_inf else e_inf, e_2 / scale_2 if scale_2 else e_2)


def has_poison(x: torch.Tensor) -> bool:
    if x.dtype in POISON_BITS and x.numel():
        int_dtype, bits = POISON_BITS[x.dtype]
        pattern = bits - (1 << (8 * x.element_size())) if bits >= 1 << (8 * x.element_size() - 1) else bits
        return bool((x.contiguous().view(int_dtype) == pattern).any().item())
    if x.numel() and x.element_size() >= 4:  # integer outputs: most bytes 0xA5
        return bool((x.contiguous().reshape(-1).view(torch.uint8) == 0xA5).float().mean().item() > 0.5)
    return False


def compare_one(key: str, cand: list[torch.Tensor], truth: list[torch.Tensor],
                eager_err: tuple[tuple[float, ...], ...], factor: float,
                prints: list[tuple[int, ...]] | None = None) -> tuple[CheckResult, Mismatch | None]:
    """Check one draw's outputs; returns the check and, if it failed, why. With `prints`, the
    one-pass kernel appends each output's `checks.fingerprint` where it computed one."""
    def fail(kind: str, detail: str, err: float = float("inf")) -> tuple[CheckResult, Mismatch]:
        return CheckResult(name=f"correct:{key}", passed=False, detail=detail), Mismatch(key, kind, detail, err)

    if len(cand) != len(truth):
        return fail("count", f"{len(cand)} outputs, expected {len(truth)}")
    worst = ""
    for i, (c, t) in enumerate(zip(cand, truth, strict=True)):
        if tuple(c.shape) != tuple(t.shape) or c.dtype != t.dtype:
            return fail("shape", f"output {i} is {c.dtype}{list(c.shape)}, expected {t.dtype}{list(t.shape)}")
        fused = fused_compare.stats(c, t, prints)  # one pass on the GPU: the same decisions as below
        if fused is not None:
            poison, nonfinite, scale_inf, sq_t, e_inf, sq_d, far = fused
            if poison:
                return fail("poison", f"output {i} holds the harness's poison pattern: memory never written")
            if nonfinite:
                return fail("nonfinite", f"output {i}: NaN/inf where the reference has none, or of another kind or sign")
            c_inf, c_2 = _relative(scale_inf, sq_t, e_inf, sq_d)
        elif has_poison(c):
            return fail("poison", f"output {i} holds the harness's poison pattern: memory never written")
        elif not c.is_floating_point():
            if not torch.equal(c, t):
                return fail("value", f"output {i}: {(c != t).sum().item()} of {c.numel()} elements differ")
            continue
        else:
            finite_t = torch.isfinite(t)
            # where the reference is not finite the candidate must match it exactly: NaN for NaN, and an
            # infinity of the same sign (-inf for +inf passed before: the values there are not compared)
            if not torch.equal(torch.isfinite(c), finite_t) or \
                    not torch.equal(c[~finite_t].isnan(), t[~finite_t].isnan()) or \
                    not torch.equal(torch.isposinf(c), torch.isposinf(t)):
                return fail("nonfinite", f"output {i}: NaN/inf where the reference has none, or of another kind or sign")
            c_inf, c_2, far = error_stats(c, t, finite_t)
        y_inf, y_2, *rest = eager_err[i] if i < len(eager_err) else (0.0, 0.0)
        y_far = rest[0] if rest else 0.0
        floor = FLOORS.get(c.dtype, 1e-5)
        allow_inf, allow_2 = factor * y_inf + floor, factor * y_2 + floor
        worst = f"err {c_inf:.2e} (allowed {allow_inf:.2e}; eager {y_inf:.2e})"
        if c_inf > allow_inf or c_2 > allow_2:
            return fail("value", f"output {i}: max error {c_inf:.2e}, rms {c_2:.2e} against float64 "
                                 f"(allowed {allow_inf:.2e} / {allow_2:.2e}; eager's own {y_inf:.2e})", c_2)
        if far > (allow_far := far_allowed(c.numel(), y_far, factor)):
            return fail("elements", f"output {i}: {far:.0f} of {c.numel()} elements off by more than half their own "
                                    f"value against float64 (allowed {allow_far:.0f}; eager's own {y_far:.0f}); "
                                    f"max error {c_inf:.2e} of the largest", c_2)
    return CheckResult(name=f"correct:{key}", passed=True, detail=worst), None
