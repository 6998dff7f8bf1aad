"""Process-global settings that change how fast PyTorch runs, read as one snapshot.

A runner takes the snapshot before any candidate code runs and compares it before and after
every call: a candidate that gives itself threads, TF32, another default dtype, cuDNN autotuning
or more cores than the reference had is `tampering`, whatever the speed it bought. The reference
runs under the same defaults in its own runner, so both are timed under equal conditions.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch

_READERS: dict[str, Callable[[], Any]] = {
    "torch.get_num_threads": torch.get_num_threads,
    "torch.get_num_interop_threads": torch.get_num_interop_threads,
    "torch.get_default_dtype": torch.get_default_dtype,
    "torch.get_float32_matmul_precision": torch.get_float32_matmul_precision,
    "torch.are_deterministic_algorithms_enabled": torch.are_deterministic_algorithms_enabled,
    "torch.is_grad_enabled": torch.is_grad_enabled,
    "torch.backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    "torch.backends.cudnn.enabled": lambda: torch.backends.cudnn.enabled,
    "torch.backends.cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
    "torch.backends.cudnn.deterministic": lambda: torch.backends.cudnn.deterministic,
    "torch.backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
    "torch.backends.mkldnn.enabled": lambda: torch.backends.mkldnn.enabled,
    "torch.backends.cuda.flash_sdp_enabled": torch.backends.cuda.flash_sdp_enabled,
    "torch.backends.cuda.mem_efficient_sdp_enabled": torch.backends.cuda.mem_efficient_sdp_enabled,
    "torch.backends.cuda.math_sdp_enabled": torch.backends.cuda.math_sdp_enabled,
    "torch.backends.cuda.preferred_linalg_library": lambda: torch.backends.cuda.preferred_linalg_library(),
    "torch.backends.cuda.preferred_blas_library": lambda: torch.backends.cuda.preferred_blas_library(),
    "os.sched_getaffinity": lambda: sorted(os.sched_getaffinity(0)),
    "os.getpriority": lambda: os.getpriority(os.PRIO_PROCESS, 0),
    "env.OMP_NUM_THREADS": lambda: os.environ.get("OMP_NUM_THREADS"),
    # flush-to-zero / denormals-are-zero (torch.set_flush_denormal) has no getter: a denormal product tells
    "torch.set_flush_denormal": lambda: float(torch.tensor([1e-40]) * torch.tensor([1.0])) == 0.0,
    # Hooks that run the candidate's code inside the harness's own frames, after its clock has
    # stopped (a trace function on the timing frame filled the output there: held-out attack, 2026-11-24)
    "sys.gettrace": sys.gettrace,
    "sys.getprofile": sys.getprofile,
    "threading.gettrace": lambda: threading.gettrace(),
    "threading.getprofile": lambda: threading.getprofile(),
    "sys.monitoring": lambda: [sys.monitoring.get_tool(i) for i in range(6)],
}
# Operators the runner itself calls after the candidate's (staging copies, checks, poison, flush): a
# kernel registered for one of them (torch.library, TORCH_LIBRARY_IMPL in an extension) would run the
# candidate's code there, after its clock has stopped. Their dispatch tables, hashed, are settings too.
_HARNESS_OPS = ("aten::copy_", "aten::fill_.Scalar", "aten::zero_", "aten::clone", "aten::empty_like",
                "aten::empty.memory_format", "aten::empty_strided", "aten::isfinite", "aten::isnan",
                "aten::abs", "aten::sum", "aten::max", "aten::eq.Tensor", "aten::ne.Tensor",
                "aten::_to_copy", "aten::view", "aten::as_strided", "aten::contiguous", "aten::detach",
                "aten::equal", "aten::from_file", "aten::lift_fresh", "aten::_local_scalar_dense")


def _table(op: str) -> str:
    return hashlib.sha256(torch._C._dispatch_dump_table(op).encode()).hexdigest()[:12]


for _op in _HARNESS_OPS:
    _READERS[f"dispatch {_op}"] = lambda op=_op: _table(op)


def _read(fn: Callable[[], Any]) -> str:
    try:
        return repr(fn())
    except Exception as e:  # noqa: BLE001 - a reader missing from this torch build reads as its error
        return f"<{type(e).__name__}>"


def snapshot() -> dict[str, str]:
    """Every setting as a printable value."""
    return {name: _read(fn) for name, fn in _READERS.items()}


def changed(before: dict[str, str], now: dict[str, str] | None = None) -> list[str]:
    """Settings whose value differs from `before`, as 'name: old -> new'."""
    now = snapshot() if now is None else now
    return [f"{k}: {before[k]} -> {now.get(k)}" for k in before if now.get(k) != before[k]]


__all__ = ["changed", "snapshot"]
