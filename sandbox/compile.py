"""Build paths for candidates: load_inline with unique names and a build cache, CuPy/NVRTC.

`install_build_hooks` runs in the worker before the candidate module is executed. It renames every
`load_inline` / `load` extension after a hash of its sources and flags, so two candidates that both
call their extension `matmul_cuda` never get each other's module, and an unchanged source is
loaded from the cache instead of being rebuilt (a new extension costs ~73 s on an H100 machine).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

BUILT_MODULES: set[str] = set()


def _key(name: str, parts: dict[str, Any]) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return f"{name}_{hashlib.sha256(blob).hexdigest()[:16]}"


def _wrap(orig: Callable[..., Any], cache: Path, kind: str) -> Callable[..., Any]:
    @functools.wraps(orig)
    def build(name: str, *args: Any, **kwargs: Any) -> Any:
        import torch

        parts = {"kind": kind, "args": args, "kwargs": {k: v for k, v in kwargs.items() if k != "verbose"},
                 "torch": torch.__version__, "cuda": torch.version.cuda}
        if kind == "load":  # file-based: hash the files' contents too
            srcs = args[0] if args else kwargs.get("sources", [])
            parts["files"] = [Path(s).read_text(errors="replace") for s in ([srcs] if isinstance(srcs, str) else srcs)]
        unique = _key(name, parts)
        build_dir = cache / unique
        build_dir.mkdir(parents=True, exist_ok=True)
        kwargs["build_directory"] = str(build_dir)
        module = orig(unique, *args, **kwargs)
        BUILT_MODULES.add(getattr(module, "__name__", unique))
        return module

    return build


def install_build_hooks(cache_dir: Path) -> None:
    """Route the candidate's extension builds through the content-addressed cache."""
    from torch.utils import cpp_extension

    ext_cache = cache_dir / "extensions"
    ext_cache.mkdir(parents=True, exist_ok=True)
    os.environ["TORCH_EXTENSIONS_DIR"] = str(ext_cache)
    os.environ["CUPY_CACHE_DIR"] = str(cache_dir / "cupy")
    cpp_extension.load_inline = _wrap(cpp_extension.load_inline, ext_cache, "load_inline")
    cpp_extension.load = _wrap(cpp_extension.load, ext_cache, "load")


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
