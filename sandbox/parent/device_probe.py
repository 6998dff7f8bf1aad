"""Which device a command gets, told without importing torch where its files say enough: `import torch` is 1.5 s
on 2 CPU cores and 3.8-5 s cold on the H100 machine (docs/BENCHMARKS.md, session 24), paid by `kevolve eval`'s own
process before its judge imported torch again. Runs in any process; imports nothing heavy."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path


def default_device() -> str:
    """cuda if PyTorch sees a GPU, else cpu: the device of every command given no --device. A build without CUDA
    or ROCm is cpu by its version file; otherwise torch decides."""
    text = _torch_version_file()
    if text is not None and version_file_without_gpu(text):
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def cuda_surely_visible(device: str) -> bool:
    """Whether `device` (cuda or cuda:N) is there without asking torch: a CUDA build (its version file), the NVIDIA
    driver loaded with GPUs listed in /proc/driver/nvidia/gpus, and N among those CUDA_VISIBLE_DEVICES leaves.
    False means "ask torch", not "no GPU" (the judge checks again whatever this says, by using it)."""
    text = _torch_version_file()
    if text is None or not version_file_with_cuda(text):
        return False
    try:
        n = sum(1 for _ in Path("/proc/driver/nvidia/gpus").iterdir())
    except OSError:
        return False
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if not entries or entries[0].startswith("-"):
            return False
        n = min(n, len(entries))
    index = device.split(":", 1)[1] if ":" in device else "0"
    return index.isdigit() and int(index) < n


def _torch_version_file() -> str | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        return (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text()
    except OSError:
        return None


def _assigned(text: str, name: str) -> str | None:
    m = re.search(rf"^{name}\s*(?::[^=\n]*)?=\s*(.+?)\s*$", text, re.M)
    return m.group(1) if m else None


def version_file_without_gpu(text: str) -> bool:
    """Whether torch/version.py's text says a build without CUDA and without ROCm (`cuda = None`, `hip = None`)."""
    return _assigned(text, "cuda") == "None" and _assigned(text, "hip") == "None"


def version_file_with_cuda(text: str) -> bool:
    """Whether torch/version.py's text says a CUDA build (`cuda = '13.0'`)."""
    value = _assigned(text, "cuda")
    return value is not None and value[:1] in ("'", '"')


__all__ = ["cuda_surely_visible", "default_device", "version_file_with_cuda", "version_file_without_gpu"]
