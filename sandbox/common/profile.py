"""What one forward call launched: kernels (with streams and device time) and ATen ops.

Runs in the worker. On the CPU the "kernels" are calls into the candidate's compiled extension
functions, seen through `sys.setprofile`; on CUDA they are the device kernels torch.profiler records.
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from kevolve.records import KernelLaunch, Profile

_perf = time.perf_counter

# Library kernels a candidate's own name must not claim. cuBLAS's own kernels that start with gemm /
# gemv are named here one by one: a bare `gemm` prefix also took candidates' kernels (`gemm_p1_kernel`,
# the most common name an LLM gives a GEMM) for cuBLAS's, and judged 12 of the 14 project-written
# level-1 GEMMs `no_custom_kernel` on the H100 (2026-11-24). A kernel the reference itself runs is
# never the candidate's either (verdict.custom_kernel_rule). PyTorch's generic `elementwise_kernel` and `reduce_kernel`
# are templates (`reduce_kernel<512, 1, …>`): the bare names are a candidate's own `extern "C"` kernels (red team 9's
# honest `reduce_kernel` softmax). A kernel whose arguments are cuBLAS's parameter types is cuBLAS's, whatever its
# name (`dot_kernel<…, cublasDotParams<…>>`: red team 9 named it in a docstring to claim it).
_TORCH_OWNED = re.compile(
    r"at::native|at::cuda|c10::|cublas\w*(Params|Tensor)|^(void )?(cutlass|cute|sm\d+_|ampere_|volta_|turing_|hopper_|cudnn|"
    r"cublas|nvjet|gemmSN_|gemmk1_|gemv2[NT]_|gemvNSP_|gemvx|splitKreduce_|cufft|"
    r"regular_fft|vector_fft|triton_(poi|red|per|tem)|Memcpy|Memset|elementwise_kernel<|"
    r"vectorized_elementwise|reduce_kernel<|xmma|implicit_convolve)", re.I)
# ATen ops that move or allocate data rather than compute the problem's function.
_NON_COMPUTE = re.compile(
    r"aten::(empty|empty_like|empty_strided|zeros|zeros_like|ones|ones_like|full|full_like|fill_|"
    r"zero_|view|reshape|_reshape_alias|_unsafe_view|as_strided|contiguous|clone|copy_|to|_to_copy|"
    r"detach|alias|t|transpose|permute|expand|squeeze|unsqueeze|flatten|slice|select|narrow|"
    r"resize_|item|_local_scalar_dense|lift_fresh|size|stride|numel|dim|is_nonzero|split|chunk|"
    r"unbind|cat|stack|record_stream|set_|result_type|broadcast_tensors|lift|empty_cache|"
    r"new_empty|new_zeros|new_full|new_empty_strided|is_same_size|_has_compatible_shallow_copy_type)$")


@dataclass(frozen=True)
class ProfileResult:
    profile: Profile
    # work on another stream outside the call: started before the calling stream reached the call, or still
    # running when forward had returned and the calling stream's work was done
    unjoined_stream_kernels: tuple[str, ...]


def is_compute_op(name: str) -> bool:
    return name.startswith("aten::") and not _NON_COMPUTE.match(name)


def _is_custom(name: str, custom_names: Sequence[str]) -> bool:
    if _TORCH_OWNED.search(name):
        return False
    return any(re.search(rf"\b{re.escape(n)}\b", name) for n in custom_names)


class _ExtCalls:
    """Counts and times calls into the candidate's compiled extensions (C functions) during a region."""

    def __init__(self, modules: set[str]) -> None:
        self.modules = modules
        self.counts: dict[str, int] = defaultdict(int)
        self.micros: dict[str, float] = defaultdict(float)
        self._open: list[tuple[Any, float]] = []

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and getattr(arg, "__module__", None) in self.modules and _is_pybind(arg):
            self.counts[self._name(arg)] += 1
            self._open.append((arg, _perf()))
        elif event in ("c_return", "c_exception") and self._open and self._open[-1][0] is arg:
            fn, t0 = self._open.pop()
            self.micros[self._name(fn)] += (_perf() - t0) * 1e6

    @staticmethod
    def _name(fn: Any) -> str:
        return f"{fn.__module__.rsplit('_', 1)[0]}.{fn.__name__}"


def _is_pybind(fn: Any) -> bool:
    """True for functions a pybind11 extension exports (bound to a function record or capsule).

    `__module__` of any builtin is writable, so a candidate could relabel torch.exp as its own
    extension's; the object a builtin is bound to (`__self__`) is read-only, and PyTorch's ATen
    bindings are bound to None or to a module, never to a pybind11 function record.
    """
    owner = type(getattr(fn, "__self__", None)).__name__
    return owner == "PyCapsule" or owner.startswith("pybind11_detail_function_record")


def profile_call(fn: Callable[..., Any], inputs: Sequence[Any], device: torch.device,
                 custom_names: Sequence[str], ext_modules: set[str]) -> ProfileResult:
    """Profile one `fn(*inputs)` call."""
    return profile_region(lambda: fn(*inputs), device, custom_names, ext_modules)


def profile_region(run: Callable[[], Any], device: torch.device, custom_names: Sequence[str],
                   ext_modules: set[str], lead: Callable[[], None] | None = None) -> ProfileResult:
    """Profile one call of `run()`: device kernels (CUDA) or extension calls (CPU), and ATen ops.

    `Profile.total_us` is what the custom kernels' share is taken of: the device time of every
    kernel (CUDA), or the host time of the whole call (CPU).

    `lead` (CUDA) queues a one-block spin on the calling stream before the call, long enough for the host to
    queue the whole call behind it: the call's own work then starts when the spin ends, and its order against
    the calling stream no longer depends on how fast the host launched it. Work on a stream that does not wait
    for the caller's runs beside the spin (it started before the call), and work the caller's stream does not
    wait for is still running when the end marker, queued behind the call, starts (`_device_kernels`).
    """
    cuda = device.type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    ext = _ExtCalls(ext_modules)
    previous = sys.getprofile()
    with profile(activities=acts) as prof:
        if cuda and lead is not None:
            lead()
        sys.setprofile(ext)
        t0 = _perf()
        try:
            run()
            if cuda:  # marker: starts on the calling stream once the candidate's work there is done
                torch.ones(1, device=device).mul_(2)
        finally:
            host_us = (_perf() - t0) * 1e6
            sys.setprofile(previous)
        if cuda:
            torch.cuda.synchronize()
    events = prof.events()
    counts = Counter(e.name for e in events if e.name.startswith("aten::"))
    ops = sorted(counts)
    kernels, unjoined, order = _device_kernels(prof, custom_names) if cuda else ([], (), ())
    if cuda:
        total = sum(k.device_time_us for k in kernels)
        torch_us = sum(k.device_time_us for k in kernels if not k.custom)
    else:  # PyTorch's own compute, as its profiler saw it (a candidate cannot relabel these events)
        total = host_us
        torch_us = sum(e.cpu_time_total for e in events
                       if e.cpu_parent is None and is_compute_op(e.name))
    if not cuda:  # on a GPU the evidence is the device kernels themselves, not the host wrappers
        kernels += [KernelLaunch(name=n, count=c, custom=True, device_time_us=ext.micros[n])
                    for n, c in sorted(ext.counts.items())]
    return ProfileResult(Profile(kernels=tuple(kernels), torch_ops=tuple(ops), op_counts=tuple(sorted(counts.items())),
                                 total_us=total,
                                 torch_us=min(torch_us, total), order=order), unjoined)


def warm_up(device: torch.device) -> None:
    """Pay the profiler's one-time start-up (seconds) before any job arrives."""
    x = torch.ones(8, device=device)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])):
        x.mul_(2)
        if device.type == "cuda":
            torch.cuda.synchronize()


ORDER_MAX = 4096  # kernels kept in Profile.order (an unrolled recurrent model launches thousands)


def _device_kernels(prof: Any, custom_names: Sequence[str]
                    ) -> tuple[list[KernelLaunch], tuple[str, ...], tuple[tuple[int, float], ...]]:
    gpu = torch.autograd.DeviceType.CUDA
    every = [e for e in prof.profiler.kineto_results.events() if e.device_type() == gpu]
    evs = [e for e in every if not e.name().startswith(("Memcpy", "Memset"))]
    if not evs:
        return [], (), ()
    # The lead spin (profile_region's `lead`), queued before the call on an idle device, is the first work to start:
    # its stream is the caller's. Then the marker is the last fill kernel (torch.ones) on it; correlation ids of
    # driver-API launches (CuPy, Triton) are not comparable with the runtime's, so order by start time. Without a
    # lead, the last fill anywhere (a fill the candidate launched last on another stream was taken for the marker and
    # its stream for the caller's: red team 9's `marker_hijack`, where there is a lead).
    first = min(every, key=lambda e: e.start_ns())
    lead = first if "spin_kernel" in first.name() else None
    on = [e for e in evs if lead is None or e.device_resource_id() == lead.device_resource_id()] or evs
    fills = [e for e in on if "FillFunctor" in e.name()]
    marker = max(fills or on, key=lambda e: e.start_ns())
    main_stream = marker.device_resource_id() if lead is None else lead.device_resource_id()
    opens = lead.start_ns() + lead.duration_ns() if lead is not None else None
    harness = (marker, lead)
    agg: dict[tuple[str, int], list[float]] = defaultdict(list)
    unjoined = []
    for e in every:
        if any(e is x for x in harness):
            continue
        if e.device_resource_id() != main_stream and (e.start_ns() + e.duration_ns() > marker.start_ns()
                                                       or (opens is not None and e.start_ns() < opens)):
            unjoined.append(e.name())
    evs = [e for e in evs if not any(e is x for x in harness)]
    for e in evs:
        agg[(e.name(), e.device_resource_id())].append(e.duration_ns() / 1e3)
    kernels = [KernelLaunch(name=n, count=len(d), device_time_us=sum(d), custom=_is_custom(n, custom_names),
                            stream=s) for (n, s), d in sorted(agg.items(), key=lambda kv: -sum(kv[1]))]
    return kernels, tuple(dict.fromkeys(unjoined)), _order(evs, None, kernels)


def _order(evs: list[Any], marker: Any, kernels: list[KernelLaunch]) -> tuple[tuple[int, float], ...]:
    """The kernels in the order they started, as (index into `kernels`, µs): a diagnostic (where_time.py's parts),
    so anything unexpected leaves it empty rather than touch the profile."""
    try:
        at = {(k.name, k.stream): i for i, k in enumerate(kernels)}
        seq = sorted((e for e in evs if e is not marker), key=lambda e: e.start_ns())[:ORDER_MAX]
        return tuple((at[(e.name(), e.device_resource_id())], e.duration_ns() / 1e3) for e in seq)
    except Exception:  # noqa: BLE001 - never a reason for a profile to fail
        return ()
