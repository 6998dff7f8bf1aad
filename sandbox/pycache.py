"""Bytecode for the runners: compiled once by trusted code, read (never written) by every runner.

A runner starts with PYTHONDONTWRITEBYTECODE=1 (isolation.scrubbed_env), so where the Python
installation holds no `__pycache__` (a read-only or `--no-compile` install, a Docker image built with
PYTHONDONTWRITEBYTECODE: the lent H100's torch is one) every runner compiled torch's sources again:
`builtins.compile` took 4 s of the profiler's 6.3 s warm-up there, and a runner's warm start was
11.5 s (torch's import 6.1 s, the profiler 5.2 s) — two spare runners could not keep up with 1-2 s
evaluations. On a CPU machine without bytecode: 5.5 s a start, 2.1 s with it.

`prime(root)` runs the runner's own imports (and the profiler's first use, on the CPU) once, in a
fresh process that runs no candidate code, with PYTHONPYCACHEPREFIX pointing at
ROOT/pycache/<cache tag> and writing allowed; a marker file names the interpreter, torch and kevolve
it was made for. `env()` then gives runners that prefix, still with PYTHONDONTWRITEBYTECODE=1;
bubblewrap binds it read-only (bwrap.py). Python checks each .pyc against its source's size and
mtime, so a changed installation is compiled again in the runner (and not written), never misread.

With isolation none a candidate runs as the user and could write .pyc files there for the runners
after it, as it could write anywhere else the user can (VERIFICATION's known limits): bubblewrap
or Docker is the boundary between candidates.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from pathlib import Path

log = logging.getLogger(__name__)

VAR = "PYTHONPYCACHEPREFIX"
ROOT_VAR = "KEVOLVE_PYCACHE_ROOT"  # set by the parent for its judges (whose HOME is their scratch)
_ACTIVE: Path | None = None  # the primed prefix this process hands to the runners it starts

# What sandbox/runner.py's main() imports before it reports warm, and the profiler's first use.
PRIME = """
import torch, torch.utils.cpp_extension
from kevolve.sandbox import (runner, integrity, harness, channel, protocol, step, compile, ablation, timing,
                             transport, cuda_rt, settings)
from kevolve.sandbox.profile import warm_up
warm_up(torch.device("cpu"))
runner.preimport()
"""


def _stamp() -> str:
    import torch

    import kevolve

    parts = (sys.version, sys.executable, torch.__version__, str(Path(torch.__file__).parent),
             getattr(kevolve, "__version__", ""), str(Path(__file__).parent), PRIME)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def default_root() -> Path:
    """Where primed bytecode lives: the user's cache (XDG_CACHE_HOME or ~/.cache)/kevolve, shared by
    every run and test of this user whatever its --cache-dir."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kevolve"


def folder(root: Path) -> Path:
    return Path(root).resolve() / "pycache" / sys.implementation.cache_tag


def prime(root: Path, timeout_s: float = 300.0) -> Path | None:
    """The primed prefix under `root` (made now if its marker is missing), or None where priming failed
    (runners then compile their sources as before; logged)."""
    global _ACTIVE
    where = folder(root)
    marker = where / f".primed-{_stamp()}"
    if not marker.exists():
        where.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env[VAR] = str(where)
        try:
            done = subprocess.run([sys.executable, "-P", "-c", PRIME], env=env, cwd=where, timeout=timeout_s,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        except (OSError, subprocess.TimeoutExpired) as e:
            log.warning("runner bytecode not primed (%s): runners compile their sources", e)
            return None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["?"])[-1]
            log.warning("runner bytecode not primed (%s): runners compile their sources", last[:200])
            return None
        marker.write_text("")
    _ACTIVE = where
    return where


def active() -> Path | None:
    """The prefix runners started from this process read, if one was primed."""
    return _ACTIVE


def env() -> dict[str, str]:
    """Variables for a runner's environment: the primed prefix, read only (nothing where none)."""
    return {VAR: str(_ACTIVE), "PYTHONDONTWRITEBYTECODE": "1"} if _ACTIVE is not None else {}


__all__ = ["PRIME", "ROOT_VAR", "VAR", "active", "default_root", "env", "folder", "prime"]
