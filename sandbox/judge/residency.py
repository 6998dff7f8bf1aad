"""Draws made again on the device when a call needs them, instead of kept in host memory (the judge, trusted).

A problem too large to keep every draw's inputs and truth on the device (KernelBench L1 19's ReLU of a 6.4 GB
tensor) kept them in pinned host memory: eight 6.4 GB allocations, each rounded up to 8 GiB by the pinned
allocator, took 26.1 s of a 27.2 s set-up with one core and 32.8 s with torch's host-register path on the H200
(2026-11-28), held 64 GiB of the machine's memory per problem, and two lanes preparing two such problems at once
finished neither. Drawing such a problem's inputs again takes milliseconds on the device, and its float64 truth
well under a second. So where that holds and the bits come out the same (checked once, on the first draw), the
judge keeps a draw's seed, shapes and fingerprints only, and makes its inputs (and truth) again when a call moves
to it: `residency = "regenerated"`. Elsewhere the host copies stay as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any

import torch

from kevolve.sandbox.common import harness as h
from kevolve.sandbox.common.protocol import Draw

REMAKE_MAX_S = 2.0  # one draw's inputs, eager's and the float64 forward and the truth: at most this, else host copies
PARAM_MAX = 2**30  # the eager model and its float64 copy stay in the judge for it: not for larger weights
ROOM_SHARE = 0.9  # of the device's memory that the session's data and one remaking may fill (eligible)


def _meta(xs: list[Any]) -> list[Any]:
    """Shapes and dtypes without memory (a slot's buffer is made from them); other values as they are."""
    return [torch.empty(x.shape, dtype=x.dtype, device="meta") if isinstance(x, torch.Tensor) else x for x in xs]


def tensors(xs: list[Any]) -> list[torch.Tensor]:
    return [x for x in xs if isinstance(x, torch.Tensor)]


class Remake:
    """Makes a draw's inputs and truth again on the device, as `oracle.prepare` made them the first time."""

    def __init__(self, module: ModuleType, model: Any, f64: Any, device: torch.device,
                 truth_of: Callable[[list[torch.Tensor], list[torch.Tensor] | None], list[torch.Tensor]],
                 like: list[torch.Tensor]) -> None:
        """`like`: the first draw's truth (its shapes and dtypes)."""
        self.module, self.model, self.f64, self.device, self._truth_of = module, model, f64, device, truth_of
        self.like = [(t.shape, t.dtype) for t in like]

    def inputs(self, d: Draw) -> list[Any]:
        return h.draw_inputs(self.module, d, self.device)

    def truth(self, d: Draw, x: list[Any] | None = None) -> list[torch.Tensor]:
        """The float64 forward rounded to the outputs' dtypes, as prepare made it (eager's forward only where an
        output is not floating point or the float64 forward fails: its error was measured once, at prepare)."""
        x = self.inputs(d) if x is None else x
        y64 = self.f64(x)
        if y64 is not None and [t.shape for t in y64] == [s for s, _dt in self.like] and all(
                dt.is_floating_point for _s, dt in self.like):
            return [t.to(dt).to(self.device) for t, (_s, dt) in zip(y64, self.like, strict=True)]
        with torch.no_grad():
            y = [t.detach() for t in h.flatten_outputs(self.model(*x))]
        if y64 is not None and [t.shape for t in y64] != [t.shape for t in y]:
            y64 = None
        return self._truth_of(y, y64)

    def same(self, d: Draw, x: list[Any], truth: list[torch.Tensor]) -> bool:
        """Does `d` come out with the same bits when made again (inputs, then truth)? Some get_inputs() draw from
        a generator the draw's seed does not set (NumPy's); some float64 kernels add in no fixed order."""
        try:
            again = self.inputs(d)
            if len(again) != len(x) or not all(
                    torch.equal(a, b) if isinstance(b, torch.Tensor) else a == b for a, b in zip(again, x, strict=True)):
                return False
            del again
            t2 = self.truth(d, x)
            return len(t2) == len(truth) and all(torch.equal(a, b) for a, b in zip(t2, truth, strict=True))
        except Exception:  # noqa: BLE001 - no room for a second copy, or a forward that fails once more: keep copies
            return False


def eligible(model: Any, varies: bool | None, cost_s: float, x_bytes: int, y_bytes: int, device: torch.device) -> bool:
    """Worth trying: a forward that gives the same outputs each time, cheap to run again, small weights, and room on
    the device to make a draw again while the session's data is there: two truths kept and both runners' slots and
    staging (4 inputs' and 4 outputs' worth), the remaking itself (the inputs, their float64 copy, the float64 result
    and the rounded truth: 3 of each). KernelBench L1 19 needs 90 GB: the H200's 143 GB has it, the H100's 80 GB
    not (host copies there, as before)."""
    params = sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers())
                 ) if isinstance(model, torch.nn.Module) else 0
    room = device.type != "cuda" or 7 * (x_bytes + y_bytes) <= ROOM_SHARE * torch.cuda.mem_get_info(device)[1]
    return varies is False and cost_s <= REMAKE_MAX_S and 3 * params <= PARAM_MAX and room


def kept(x: list[Any], truth: list[torch.Tensor]) -> tuple[list[Any], list[torch.Tensor]]:
    """What a regenerated draw keeps of its inputs and truth: shapes (meta tensors)."""
    return _meta(x), _meta(truth)  # type: ignore[return-value]


class Pristine(Mapping[str, list[Any]]):
    """A runner's slots' pristine inputs by draw: kept ones as they are, regenerated ones made when asked for.
    `lazy`: the keys made on demand (their slots check a call left them untouched by fingerprint); `like(key)`
    gives shapes without making anything."""

    def __init__(self, state: Any, keys: list[str]) -> None:
        self.state, self.keys_ = state, list(keys)
        self.lazy = frozenset(k for k in self.keys_ if state.draws[k].remake is not None)

    def __getitem__(self, key: str) -> list[Any]:
        if key not in self.keys_:
            raise KeyError(key)
        return self.state.inputs_of(key)

    def like(self, key: str) -> list[Any]:
        return self.state.draws[key].inputs

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys_)

    def __len__(self) -> int:
        return len(self.keys_)


def pinned(obj: Any) -> Any:
    """Host copies in page-locked memory where it can be had: a draw that is not in a device slot is
    copied in again whenever calls move to it, and from pageable memory that is slow (6.4 GB per draw
    of KernelBench level 1 #19). Pageable where pinning fails, and for non-contiguous tensors."""
    if isinstance(obj, torch.Tensor):
        if obj.device.type != "cuda" or not obj.is_contiguous():
            return obj.cpu()  # keeps a non-contiguous input's strides, which the runner's slots copy
        try:
            return torch.empty(obj.shape, dtype=obj.dtype, pin_memory=True).copy_(obj)
        except RuntimeError:
            return obj.cpu()
    if isinstance(obj, (list, tuple)):
        return type(obj)(pinned(o) for o in obj)
    return obj


def release_pinned() -> None:
    """Give freed pinned host memory back to the system: PyTorch's pinned-memory allocator keeps freed
    blocks for reuse, so dropping a problem's host copies frees nothing until this (where torch has it)."""
    import gc

    gc.collect()
    empty = getattr(torch._C, "_host_emptyCache", None)
    if empty is not None:
        try:
            empty()
        except RuntimeError:
            pass


__all__ = ["PARAM_MAX", "REMAKE_MAX_S", "ROOM_SHARE", "Pristine", "Remake", "eligible", "kept", "pinned", "release_pinned", "tensors"]
