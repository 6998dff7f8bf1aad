"""How much of a problem the judge can keep: bytes of a draw, the draws that fit the host memory limit (all, else a
few), and whether they stay on the device (oracle.py prepares them)."""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import torch

from kevolve.sandbox.common import harness as h
from kevolve.sandbox.common.protocol import Draw

_DEVICE_SHARE = 0.35  # of free device memory that a problem's kept data may use


def nbytes(xs: list[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in xs if isinstance(t, torch.Tensor))


def _free_device_bytes(device: torch.device) -> int:
    if device.type != "cuda":
        return 0
    free, _total = torch.cuda.mem_get_info(device)
    return free


def pinned_bytes(xs: list[Any]) -> int:
    """Host memory `_pinned` copies of these tensors take: PyTorch's pinned-memory allocator rounds each
    block up to a power of two (a 6.4 GB tensor holds 8 GiB) and keeps freed blocks for reuse."""
    return sum(1 << max(0, (n - 1).bit_length()) for t in xs if isinstance(t, torch.Tensor)
               and (n := t.numel() * t.element_size()) > 0)


_FEW = ("d0", "d1", "negate", "f0")  # the draws kept when all of them do not fit: two plain, one shifted, one fresh


def param_bytes(model: Any) -> int:
    return nbytes(list(model.parameters()) + list(model.buffers())) if isinstance(model, torch.nn.Module) else 0


def meta_sizes(module: ModuleType, init_args: list[Any]) -> tuple[int, int, int] | None:
    """(input, output, parameter) bytes of one draw, from get_inputs() and Model on the meta device:
    shapes without memory. None where the problem does not run there (then the first draw tells)."""
    try:
        with torch.device("meta"), torch.no_grad():
            x = list(module.get_inputs())
            model = module.Model(*init_args)
            y = h.flatten_outputs(model(*x))
        return nbytes(x), nbytes([t for t in y if isinstance(t, torch.Tensor)]), param_bytes(model)
    except Exception:  # noqa: BLE001 - any failure here only means no early estimate
        return None


def judge_bytes(kept: int, inputs: int, outputs: int, params: int) -> int:
    """Host memory the judge needs for a problem: `kept` draws of inputs and truth, the model and its
    float64 copy, and while a draw is prepared, its float64 inputs and outputs and the comparisons'
    copies (an estimate for float32 data: float64 doubles it)."""
    return kept * (inputs + outputs) + 3 * params + 2 * inputs + 6 * outputs


def fit_draws(plan: list[Draw], done: int, sizes: tuple[int, int, int], limit: int) -> list[Draw]:
    """The draws still to make: all of `plan`, else the few (_FEW), else StageError memory_limit."""
    from kevolve.sandbox.isolate.memory import available_bytes, gib

    few = [d for d in plan if d.key in _FEW]
    for keep in (plan, few):
        if judge_bytes(done + len(keep), *sizes) <= limit:
            return keep
    need = judge_bytes(done + len(few), *sizes)
    raise h.StageError("problem_error", (
        f"memory_limit: checking candidates needs about {gib(need)} of host memory in the judge "
        f"({done + len(few)} input draws of {gib(sizes[0])} with outputs of {gib(sizes[1])}, float64 truth, "
        f"parameters {gib(sizes[2])}), over the limit of {gib(limit)} per process (--memory-limit-gb; "
        f"{gib(available_bytes())} available on this machine)"))


def residency_of(x: list[Any], y: list[torch.Tensor], n: int, device: torch.device) -> str:
    """'device' when every draw's inputs and truth (plus a runner's copies) fit in the share. KEVOLVE_RESIDENCY=host
    (regenerated where it can be) or =pinned (host copies) sends any problem off the device: the paths of the
    largest problems, tested on small ones."""
    forced = os.environ.get("KEVOLVE_RESIDENCY", "")
    if forced in ("host", "pinned"):
        return "host"
    if device.type != "cuda":
        return "device"
    per = 2 * nbytes(x) + 2 * nbytes(y)  # pristine + a runner's slot; truth + staging
    return "device" if n * per <= _DEVICE_SHARE * _free_device_bytes(device) else "host"


__all__ = ["fit_draws", "judge_bytes", "meta_sizes", "nbytes", "param_bytes", "pinned_bytes", "residency_of"]
