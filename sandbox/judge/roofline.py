"""Achieved bandwidth, FLOP rate and roofline fraction of a timed forward.

Bytes are the least any implementation must move (inputs and parameters read once, outputs
written once); FLOPs are what torch.utils.flop_counter counts on the reference (matmul, conv,
attention — elementwise work is not counted). Peaks are measured ceilings, not datasheet numbers.
"""

from __future__ import annotations

from kevolve.records import Profile

# (device-name substring, copy bandwidth GB/s counting read+write, fp32 non-tensor-core TFLOP/s)
# H100: measured on the lent H100 machine 2026-11-21 (2.9 TB/s; fp32 matmul 51 TFLOP/s).
# H200: measured on the lent H200 machine 2026-10-28 (4.3 TB/s); fp32 taken as the H100's (same SMs).
PEAKS = (("H200", 4300.0, 51.0), ("H100", 2900.0, 51.0))


def peaks_for(device_name: str) -> tuple[float, float] | None:
    for key, gbps, tflops in PEAKS:
        if key in device_name:
            return gbps, tflops
    return None


def annotate(profile: Profile | None, median_ms: float, min_bytes: int | None, flops: int | None,
             device_name: str) -> Profile | None:
    """The profile with achieved GB/s, TFLOP/s and the fraction of the nearer roof filled in."""
    if profile is None or median_ms <= 0:
        return profile
    secs = median_ms * 1e-3
    gbps = min_bytes / secs / 1e9 if min_bytes else None
    tflops = flops / secs / 1e12 if flops else None
    peaks = peaks_for(device_name)
    frac = None
    if peaks is not None:
        parts = [v / p for v, p in ((gbps, peaks[0]), (tflops, peaks[1])) if v is not None]
        frac = max(parts) if parts else None
    return profile.model_copy(update={"achieved_gbps": gbps, "achieved_tflops": tflops,
                                      "roofline_fraction": frac, "min_bytes": min_bytes, "flops": flops})
