"""The few CUDA runtime calls PyTorch does not expose (ctypes on the libcudart torch loaded)."""

from __future__ import annotations

import ctypes
import functools
import logging

log = logging.getLogger(__name__)
_LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize


@functools.cache
def cudart() -> ctypes.CDLL | None:
    """The libcudart that torch loaded (same library, same context), or None on a CPU build."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "libcudart" in line}
    except OSError:
        paths = set()
    for path in sorted(paths) + ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    log.warning("libcudart not found: persisting-L2 checks disabled")
    return None


def reset_persisting_l2() -> None:
    """Evict lines marked persisting, so an L2 access-policy window cannot survive the flush."""
    rt = cudart()
    if rt is not None:
        rt.cudaCtxResetPersistingL2Cache()


def persisting_l2_limit() -> int | None:
    """Bytes of L2 set aside for persisting accesses (0 unless someone asked for it)."""
    rt = cudart()
    if rt is None:
        return None
    value = ctypes.c_size_t(0)
    if rt.cudaDeviceGetLimit(ctypes.byref(value), _LIMIT_PERSISTING_L2) != 0:
        return None
    return value.value
