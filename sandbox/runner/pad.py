"""The GPU pad a timed call waits behind, filling every SM so that nothing else can run beside it.

A timed call is queued while the GPU is kept busy (so that the events measure device time, not the
host's launches). `torch.cuda._sleep` kept it busy with one thread: a kernel the candidate launched on
a stream that does not wait for the timed stream ran beside that thread, during the pad, and was done
before the timed window opened, so neither the events nor the device-wide sync after the call saw it.
This pad launches as many 1,024-thread blocks as every SM can hold at once (thread slots full: no other
kernel's block can become resident) and spins each thread on the GPU's nanosecond timer, so it also
needs no clock calibration (`_sleep` counts SM cycles, whose rate rises 6x from idle to busy).

The kernel is PTX, loaded through the driver API on the library torch already loaded; where that fails
(no driver symbols, an old driver), `Pad.load` returns None and the caller keeps `torch.cuda._sleep`.
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

PTX = rb"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry kevolve_pad(.param .u64 ns)
{
    .reg .pred %p;
    .reg .b64 %r<5>;
    ld.param.u64 %r1, [ns];
    mov.u64 %r2, %globaltimer;
$L_spin:
    mov.u64 %r3, %globaltimer;
    sub.s64 %r4, %r3, %r2;
    setp.lt.u64 %p, %r4, %r1;
    @%p bra $L_spin;
    ret;
}
"""
BLOCK = 1024


def grid_for(sms: int, threads_per_sm: int) -> int:
    """Blocks that fill every SM's thread slots at once (2 per SM on an H100: 2,048 threads each)."""
    return max(1, sms) * max(1, threads_per_sm // BLOCK)


def _error_name(cu: Any, rc: int) -> str:
    name = ctypes.c_char_p()
    try:
        if cu.cuGetErrorName(rc, ctypes.byref(name)) == 0 and name.value:
            return f"{name.value.decode()} ({rc})"
    except (OSError, AttributeError, TypeError):
        pass
    return f"CUresult {rc}"


@dataclass
class Pad:
    """A loaded pad kernel and the grid that fills the device."""

    driver: Any
    function: ctypes.c_void_p
    grid: int
    launch_fn: Any = None

    @classmethod
    def load(cls, sms: int, threads_per_sm: int, driver: Any = None) -> Pad | None:
        """The pad in the calling thread's current CUDA context (torch's primary context, once torch has
        made that thread use the device), or None, logged, where the driver cannot load it."""
        try:
            cu = driver if driver is not None else ctypes.CDLL("libcuda.so.1")
            module, function = ctypes.c_void_p(), ctypes.c_void_p()
            rc = cu.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(PTX))
            if rc != 0:
                raise OSError(f"cuModuleLoadData: {_error_name(cu, rc)}")
            rc = cu.cuModuleGetFunction(ctypes.byref(function), module, b"kevolve_pad")
            if rc != 0:
                raise OSError(f"cuModuleGetFunction: {_error_name(cu, rc)}")
            launch_fn = cu.cuLaunchKernel  # taken now, before any candidate code runs
        except (OSError, AttributeError) as e:
            log.warning("full-device GPU pad unavailable (%s): the one-thread sleep pads timed calls", e)
            return None
        return cls(cu, function, grid_for(sms, threads_per_sm), launch_fn)

    def launch(self, ns: int, stream: int) -> None:
        """Queue the pad for `ns` nanoseconds on `stream` (a CUstream handle, as torch gives it)."""
        arg = ctypes.c_uint64(max(0, int(ns)))
        params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(arg), ctypes.c_void_p))
        rc = self.launch_fn(self.function, self.grid, 1, 1, BLOCK, 1, 1, 0, ctypes.c_void_p(stream), params, None)
        if rc != 0:
            raise RuntimeError(f"GPU pad launch failed ({_error_name(self.driver, rc)})")


__all__ = ["BLOCK", "PTX", "Pad", "grid_for"]
