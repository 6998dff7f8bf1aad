"""Ablation: is the forward's answer made of what the custom kernels computed?

In the runner, the build hook hands the candidate a thin wrapper around each compiled extension.
Normally the wrapper only calls through. In an *ablation call* it replaces whatever each extension
call produced — the tensors it returned and the tensor arguments it wrote into — with random
values. If the forward's output is still right, the custom kernels did not make it: PyTorch did,
and they are a decoy (a token kernel beside `torch.clamp_min` standing in for `relu`). Random
finite values, not NaN: `0 * y` would carry a NaN into the output and make a decoy look needed.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import torch

_STATE = {"on": False, "calls": 0}


class ablating:  # noqa: N801 - used as a context manager
    """Within this block, extension calls' results are replaced by random values."""

    def __enter__(self) -> None:
        _STATE["on"], _STATE["calls"] = True, 0

    def __exit__(self, *exc: object) -> None:
        _STATE["on"] = False


def ablated_calls() -> int:
    """How many extension calls the last ablation block replaced."""
    return _STATE["calls"]


def _tensors(v: Any) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    return []


def _scramble(t: torch.Tensor) -> None:
    if t.is_floating_point():
        t.copy_(torch.rand_like(t) * 4 - 2)
    elif t.dtype == torch.bool:
        t.copy_(torch.rand(t.shape, device=t.device) > 0.5)
    elif t.dtype.is_signed or t.dtype == torch.uint8:
        t.copy_(torch.randint_like(t, 0, 7))


def _wrap(fn: Any) -> Any:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not _STATE["on"]:
            return fn(*args, **kwargs)
        ins = [t for t in _tensors(list(args) + list(kwargs.values())) if t.numel()]
        before = [t.detach().clone() for t in ins]
        out = fn(*args, **kwargs)
        with torch.no_grad():
            for t, b in zip(ins, before, strict=True):
                if not torch.equal(t, b):  # an argument the extension wrote into: its result
                    _scramble(t)
            for t in _tensors(out):
                _scramble(t)
        _STATE["calls"] += 1
        return out

    return call


class ExtensionProxy(ModuleType):
    """The candidate's view of a compiled extension: every function wrapped by `_wrap`."""

    def __init__(self, module: ModuleType) -> None:
        super().__init__(module.__name__)
        for name in dir(module):
            value = getattr(module, name)
            setattr(self, name, _wrap(value) if callable(value) and not isinstance(value, type) else value)
        self.__wrapped_extension__ = module


def wrap_extension(module: Any) -> Any:
    return ExtensionProxy(module) if isinstance(module, ModuleType) else module


__all__ = ["ExtensionProxy", "ablated_calls", "ablating", "wrap_extension"]
