"""`kevolve doctor`: report what this machine can do. Never prints a secret's value."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess

from rich.console import Console
from rich.table import Table

from kevolve.languages import kernel_modules

_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "KEVOLVE_API_TOKEN")


def _version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
        return out.splitlines()[-1] if out else "present"
    except (OSError, subprocess.TimeoutExpired):
        return "not found"


def run_doctor() -> None:
    from kevolve.sandbox.isolate.bwrap import find_bwrap
    from kevolve.sandbox.config import BWRAP_ENV

    rows: list[tuple[str, str]] = []
    gpu = False
    try:
        import torch

        rows.append(("torch", torch.__version__))
        gpu = torch.cuda.is_available()
        if gpu:
            rows += [(f"gpu {i}", torch.cuda.get_device_name(i)) for i in range(torch.cuda.device_count())]
        else:
            rows.append(("gpu", "none visible: CUDA kernels (and --offline) need an NVIDIA GPU; here, --device cpu "
                                "with an LLM, and eval / bench of C++ candidates"))
    except ImportError:
        rows.append(("torch", "not installed"))
    from kevolve.sandbox.isolate.memory import available_bytes, default_limit_gb, gib

    rows.append(("memory", f"{gib(available_bytes())} available; each evaluation process may use "
                           f"{default_limit_gb():.1f} GiB by default (--memory-limit-gb)"))
    rows.append(("nvcc", _version(["nvcc", "--version"]) if shutil.which("nvcc") else "not found"))
    rows.append(("ncu", "present" if shutil.which("ncu") else "not found"))
    cpp = shutil.which("cpp") or shutil.which("g++") or shutil.which("clang")
    rows.append(("cpp", f"{cpp} (the policy also reads native sources preprocessed)" if cpp else
                 "not found: the policy reads native sources as written only"))
    for module in kernel_modules():  # each kernel language's Python modules (kevolve/languages.py)
        rows.append((module, "present" if importlib.util.find_spec(module) else "not installed"))
    rows.append(("docker", "present" if shutil.which("docker") else "not found"))
    bwrap = os.environ.get(BWRAP_ENV) or None
    exe, why = find_bwrap(bwrap)
    rows.append(("bwrap", (f"{exe} ({BWRAP_ENV})" if bwrap else exe) if exe else why))
    from kevolve.cli_sandbox import isolation_rows

    rows += isolation_rows(bwrap, gpu)
    rows += [(k, "set" if os.environ.get(k) else "not set") for k in _KEYS]
    table = Table("what", "status")
    for r in rows:
        table.add_row(*r)
    Console().print(table)
