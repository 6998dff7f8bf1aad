"""Achieved bandwidth, FLOP rate and roofline fraction of a timed forward.

Bytes are the least any implementation must move (inputs and parameters read once, outputs
written once); FLOPs are what torch.utils.flop_counter counts on the reference (matmul, conv,
attention — elementwise work is not counted). Peaks are measured ceilings, not datasheet numbers.
"""

from __future__ import annotations

from kevolve.records import Profile

# (device-name substring, copy bandwidth GB/s counting read+write, tensor-core TFLOP/s: TF32, bf16/fp16)
# H100: measured on the lent H100 machine 2026-11-21 (copy 2.9 TB/s; matmul TF32 404, bf16 760 TFLOP/s).
# H200: measured on the lent H200 machine 2026-10-28 (4.3 TB/s); its tensor cores taken as the H100's (same SMs).
# The compute roof of a float32 problem is TF32's, not fp32's without tensor cores (51 TFLOP/s measured): an
# implementation within tolerance may use it (cuDNN's convolutions do by default, 3xTF32 products keep fp32's
# accuracy), and fractions against 51 read 125-250% on level-3 models (H100, 2026-11-27).
PEAKS = (("H200", 4300.0, 404.0, 760.0), ("H100", 2900.0, 404.0, 760.0))
_HALF = ("bfloat16", "float16", "bf16", "fp16", "half")


def peaks_for(device_name: str, dtype: str | None = None) -> tuple[float, float | None] | None:
    """(copy GB/s, compute TFLOP/s) of the device for outputs of `dtype`; the compute roof is None where it
    was not measured (float64)."""
    for key, gbps, tf32, half in PEAKS:
        if key in device_name:
            d = (dtype or "float32").removeprefix("torch.")
            return gbps, half if d in _HALF else (None if d in ("float64", "double") else tf32)
    return None


def annotate(profile: Profile | None, median_ms: float, min_bytes: int | None, flops: int | None,
             device_name: str, dtype: str | None = None) -> Profile | None:
    """The profile with achieved GB/s, TFLOP/s and the fraction of the nearer roof filled in (`dtype`: the
    problem's output type, which picks the compute roof)."""
    if profile is None or median_ms <= 0:
        return profile
    secs = median_ms * 1e-3
    gbps = min_bytes / secs / 1e9 if min_bytes else None
    tflops = flops / secs / 1e12 if flops else None
    peaks = peaks_for(device_name, dtype)
    frac = None
    if peaks is not None:
        parts = [v / p for v, p in ((gbps, peaks[0]), (tflops, peaks[1])) if v is not None and p]
        frac = max(parts) if parts else None
    return profile.model_copy(update={"achieved_gbps": gbps, "achieved_tflops": tflops,
                                      "roofline_fraction": frac, "min_bytes": min_bytes, "flops": flops})
