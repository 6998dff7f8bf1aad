"""In-worker integrity guards: tamper detection, allocator poisoning, output sanity.

Runs inside the worker. The harness keeps its own references to the C-level clocks and sync
functions (timing.py) taken before any candidate code runs; these guards detect, after the fact,
that the candidate replaced something the harness or PyTorch relies on.
"""

from __future__ import annotations

import sys
import threading
import time
from types import ModuleType
from typing import Any

import torch

from kevolve.sandbox.common.harness import POISON_BITS
from kevolve.sandbox.common.protocol import OutputSpec

_SENSITIVE: list[tuple[Any, str]] = [
    (time, "perf_counter"), (time, "perf_counter_ns"), (time, "time"), (time, "monotonic"),
    (time, "process_time"), (time, "sleep"), (sys, "setprofile"), (sys, "settrace"), (threading, "Thread"),
    (torch, "allclose"), (torch, "isclose"), (torch, "equal"), (torch, "manual_seed"),
    (torch, "randn"), (torch, "rand"), (torch, "randint"), (torch, "empty"), (torch, "zeros"),
    (torch.testing, "assert_close"), (torch.Tensor, "__eq__"), (torch.Tensor, "clone"),
    (torch.Tensor, "cpu"), (torch.Tensor, "to"), (torch.Tensor, "copy_"), (torch.Tensor, "detach"),
    (torch.Tensor, "__torch_function__"), (torch.Tensor, "__getattribute__"), (torch.Tensor, "numel"),
    (torch.nn.Module, "__call__"), (torch.nn.Module, "_call_impl"), (torch.nn.Module, "to"),
    (torch.cuda, "synchronize"), (torch.cuda, "Event"), (torch.cuda, "current_stream"),
    (torch.cuda, "Stream"), (torch.cuda, "empty_cache"), (torch.cuda, "set_per_process_memory_fraction"),
    (torch.cuda.Event, "record"), (torch.cuda.Event, "elapsed_time"), (torch.cuda.Event, "synchronize"),
    (torch._C, "_cuda_synchronize"), (torch.profiler, "profile"),
]


# Importing torch._dynamo (2.3 s of a worker's 5 s start-up, so not done eagerly) rebinds
# torch.manual_seed to `torch._disable_dynamo(torch.manual_seed)`. That exact wrapper of the exact
# original is PyTorch's doing, not the candidate's.
_DISABLE_DYNAMO_CODE = torch._disable_dynamo(lambda: None).__code__


def _dynamo_rewrap(now: Any, orig: Any) -> bool:
    return (getattr(now, "__code__", None) is _DISABLE_DYNAMO_CODE
            and orig in (c.cell_contents for c in (now.__closure__ or ())))


def _raw(owner: Any, attr: str) -> Any:
    d = getattr(owner, "__dict__", None)
    if isinstance(owner, type) and d is not None and attr in d:
        return d[attr]
    return getattr(owner, attr, None)


class Guards:
    """Snapshot of everything the harness trusts; `tampered()` names what changed since."""

    def __init__(self, own_modules: list[ModuleType]) -> None:
        self._items = [(o, a, _raw(o, a)) for o, a in _SENSITIVE]
        for mod in own_modules:  # the harness's own functions and methods, e.g. timing.Timer.one
            for a, v in vars(mod).items():
                # Functions, and constants too: a switch or a buffer size the harness reads later.
                if callable(v) or isinstance(v, (int, float, str, bytes, tuple, frozenset, type(None))):
                    self._items.append((mod, a, v))
                if isinstance(v, type) and v.__module__ == mod.__name__:
                    self._items += [(v, m, f) for m, f in vars(v).items()
                                    if callable(f) or isinstance(f, (staticmethod, classmethod, property))]
        # A function's code can be swapped in place, so keep the code objects too.
        self._codes = [(v, v.__code__) for _, _, v in self._items if hasattr(v, "__code__")]
        self._modes = self._mode_depths()

    def watch(self, obj: Any, *attrs: str) -> None:
        """Also guard these attributes of one of the harness's own objects, made before candidate code
        ran (the stepper's GPU pad: set to None, the one-thread sleep would pad timed calls again)."""
        self._items += [(obj, a, _raw(obj, a)) for a in attrs]

    @staticmethod
    def _mode_depths() -> tuple[int, int]:
        return (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack())

    def tampered(self) -> list[str]:
        bad = []
        for owner, attr, orig in self._items:
            now = _raw(owner, attr)
            if now is not orig and not _dynamo_rewrap(now, orig):
                name = getattr(owner, "__name__", type(owner).__name__)
                bad.append(f"{name}.{attr}")
        bad += [f"{getattr(f, '__qualname__', f)}.__code__" for f, c in self._codes if f.__code__ is not c]
        if self._mode_depths() != self._modes:
            bad.append("torch function/dispatch mode left active")
        return bad


_POISON_COPIES, _POISON_COPIES_UNDER = 4, 64 * 2**20


def poison_allocator(specs: tuple[OutputSpec, ...], device: torch.device) -> None:
    """Fill and free blocks of each expected output size, so an unwritten output shows poison.

    The CUDA caching allocator (and, with the worker's malloc settings, glibc on the CPU) hands
    the next allocation of the same size the block just freed: a candidate that returns memory
    it never wrote returns the harness's pattern instead of whatever an earlier computation left.
    """
    bufs = []
    for spec in specs:
        dtype = getattr(torch, spec.dtype.removeprefix("torch."), None)
        if not isinstance(dtype, torch.dtype):
            continue
        # Several blocks of each size where that is cheap: the last call's freed outputs sit in the
        # allocator's free lists too, and an unwritten output must get poison, not one of those.
        nbytes = dtype.itemsize * max(1, int(torch.Size(spec.shape).numel()))
        for _ in range(_POISON_COPIES if nbytes <= _POISON_COPIES_UNDER else 1):
            t = torch.empty(spec.shape, dtype=dtype, device=device)
            if dtype in POISON_BITS:
                int_dtype, bits = POISON_BITS[dtype]
                t.view(int_dtype).fill_(signed(bits, t.element_size()))
            else:
                t.reshape(-1).view(torch.uint8).fill_(0xA5)  # reshape: a 0-dim tensor has no byte view
            bufs.append(t)
    del bufs


def signed(bits: int, nbytes: int) -> int:
    """Two's-complement value of an unsigned bit pattern (fill_ on int views wants it signed)."""
    return bits - (1 << (8 * nbytes)) if bits >= 1 << (8 * nbytes - 1) else bits


def output_problems(outputs: list[Any], device: torch.device) -> str | None:
    """None if every output is a plain, materialised tensor on the problem's device."""
    for i, o in enumerate(outputs):
        if not isinstance(o, torch.Tensor):
            return f"bad_output: output {i} is a {type(o).__name__}, not a tensor"
        if type(o) is not torch.Tensor and type(o) is not torch.nn.Parameter:
            return f"tensor_subclass: output {i} is a {type(o).__name__} (subclasses can lie to comparisons)"
        if o.is_meta or o.layout is not torch.strided:
            return f"bad_output: output {i} has no real strided storage ({o.layout}, meta={o.is_meta})"
        if o.device.type != device.type:
            return f"wrong_device: output {i} is on {o.device}, the problem runs on {device}"
        try:
            o.untyped_storage().data_ptr()
        except Exception as e:  # noqa: BLE001 - fake / lazy tensors fail here
            return f"bad_output: output {i} has no storage ({type(e).__name__})"
    return None


def _span(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def aliasing(outputs: list[Any], inputs: Any, staging: Any, may_alias_inputs: bool) -> str | None:
    """None unless an output's memory overlaps a staging buffer of the harness (never the model's to return), or
    an input's where the reference's outputs never share their inputs' memory (red team 5: `return x.t()` left its
    work to the harness's staging copy, 1.25x; a frame-walking candidate returned the staging buffer itself)."""
    def overlaps(a: tuple[int, int], tensors: Any) -> int | None:
        for j, t in enumerate(tensors):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                lo, hi = _span(t)
                if a[0] < hi and lo < a[1]:
                    return j
        return None

    for i, o in enumerate(outputs):
        span = _span(o)
        if span[1] <= span[0]:
            continue
        if overlaps(span, [t for st in staging for t in st]) is not None:
            return f"aliases_staging: output {i} is memory of the harness's staging buffers, not the model's own"
        j = None if may_alias_inputs else overlaps(span, inputs)
        if j is not None:
            return (f"aliases_input: output {i} shares memory with input {j} (a view of it); the reference's outputs "
                    "never do, so the harness's copy would do the model's work")
    return None


def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive() and t.ident is not None}


_monotonic = time.monotonic  # taken before candidate code runs


def settle_threads(before: set[int], limit_s: float) -> None:
    """Give threads started since `before` up to `limit_s` to end.

    A thread that finishes the output a moment after forward returns then shows as a changed
    output (async_output) whatever the scheduler did; one still running after this is a
    background_thread.
    """
    deadline = _monotonic() + limit_s
    while live_threads() - before and _monotonic() < deadline:
        time.sleep(0.002)
