"""Build paths for candidates: load_inline with unique names and a build cache, CuPy/NVRTC.

`install_build_hooks` runs in the worker before the candidate module is executed. It renames every
`load_inline` / `load` extension after a hash of its sources and flags, so two candidates that both
call their extension `matmul_cuda` never get each other's module, and an unchanged source is
loaded from the cache instead of being rebuilt (a new extension costs ~73 s on an H100 machine).

The shared cache is read-only to a sandboxed candidate. Its builds go to a private build directory
and the host copies them into the cache afterwards, under the candidate's *scope* (a hash of its
whole source): so a candidate can only ever fill the cache entries that the very same source will
load, never plant a module that another candidate would import (`promote`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

BUILT_MODULES: set[str] = set()


def _key(name: str, parts: dict[str, Any]) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return f"{name}_{hashlib.sha256(blob).hexdigest()[:16]}"


def build_scope(candidate_source: str) -> str:
    """The cache namespace of one candidate source: its builds are only ever loaded by the same text."""
    return hashlib.sha256(candidate_source.encode()).hexdigest()[:20]


def _wrap(orig: Callable[..., Any], shared: Path, private: Path, kind: str) -> Callable[..., Any]:
    @functools.wraps(orig)
    def build(name: str, *args: Any, **kwargs: Any) -> Any:
        import torch
        from torch.utils import cpp_extension

        parts = {"kind": kind, "args": args, "kwargs": {k: v for k, v in kwargs.items() if k != "verbose"},
                 "torch": torch.__version__, "cuda": torch.version.cuda}
        if kind == "load":  # file-based: hash the files' contents too
            srcs = args[0] if args else kwargs.get("sources", [])
            parts["files"] = [Path(s).read_text(errors="replace") for s in ([srcs] if isinstance(srcs, str) else srcs)]
        unique = _key(name, parts)
        cached = shared / unique
        if (cached / f"{unique}.so").is_file():  # built before by this same source: import it as is
            module = cpp_extension._import_module_from_library(unique, str(cached),
                                                                 kwargs.get("is_python_module", True))
        else:
            build_dir = private / unique
            build_dir.mkdir(parents=True, exist_ok=True)
            kwargs["build_directory"] = str(build_dir)
            module = orig(unique, *args, **kwargs)
        BUILT_MODULES.add(getattr(module, "__name__", unique))
        from kevolve.sandbox.ablation import wrap_extension

        return wrap_extension(module)  # calls through; replaces results only in an ablation call

    return build


def install_build_hooks(cache_dir: Path, build_dir: Path | None = None, scope: str = "") -> None:
    """Route the candidate's extension builds through the content-addressed cache.

    `cache_dir` is read from; builds are written under `build_dir` (when the cache is read-only to
    the candidate) or straight into the cache (no sandbox: nothing to protect it from).
    """
    from torch.utils import cpp_extension

    out = build_dir or cache_dir
    shared, private = cache_dir / "extensions" / scope, out / "extensions" / scope
    private.mkdir(parents=True, exist_ok=True)
    os.environ["TORCH_EXTENSIONS_DIR"] = str(private)
    os.environ["CUPY_CACHE_DIR"] = str(out / "cupy")
    cpp_extension.load_inline = _wrap(cpp_extension.load_inline, shared, private, "load_inline")
    cpp_extension.load = _wrap(cpp_extension.load, shared, private, "load")


def promote(built: Path, cache_dir: Path, scope: str, max_bytes: int = 4 * 2**30) -> bool:
    """Host side, after a worker finished: copy its builds into the cache under its scope.

    First writer wins (an existing scope is never replaced); only plain files and directories are
    copied (a symlink the candidate planted is dropped); the copy is renamed into place whole, so a
    reader never sees half of it. Returns whether anything was added.
    """
    src, dst = built / "extensions" / scope, cache_dir / "extensions" / scope
    if not scope or not src.is_dir() or dst.exists():
        return False
    files = [Path(root, n) for root, _dirs, names in os.walk(src) for n in names]  # links not followed
    files = [f for f in files if f.is_file() and not f.is_symlink()]
    if not files or sum(p.stat().st_size for p in files) > max_bytes:
        return False
    tmp = dst.parent / f".{scope}.{uuid.uuid4().hex}"
    try:
        for f in files:
            target = tmp / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target, follow_symlinks=False)
        os.rename(tmp, dst)  # fails if another worker's copy landed first: theirs stands
        return True
    except OSError:
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def nvrtc_compile(source: str, name: str = "kernel.cu", arch: str = "compute_90",
                  options: tuple[str, ...] = ()) -> tuple[bool, str]:
    """Compile CUDA C++ to PTX with NVRTC, without a GPU (CuPy's low-level bindings).

    Returns (ok, log). Needs `cupy` and the `nvidia-cuda-nvrtc` wheel (or a CUDA toolkit).
    """
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(source, name, [], [])
    try:
        nvrtc.compileProgram(prog, [f"--gpu-architecture={arch}", "-std=c++17", *options])
        return True, nvrtc.getProgramLog(prog)
    except nvrtc.NVRTCError:
        return False, nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)
