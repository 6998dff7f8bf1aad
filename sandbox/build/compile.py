"""Build paths for candidates: load_inline with unique names and a build cache, CuPy/NVRTC.

`install_build_hooks` runs in the worker before the candidate module is executed. A `load_inline`
call is turned into its `ExtensionSpec` and content key (sandbox/build/extensions.py, the same converter
the build service uses): the service's artifact for that key (`extensions/by-source/<key>`) is
imported as is, without ninja or a compiler; else this candidate's own earlier build; else it is
built here with kevolve's fast recipe (sandbox/build/recipe.py). The module is named after the key, so
two candidates that both call their extension `matmul_cuda` never get each other's module, and two
that differ only in the name share one build. File-based `load` (and load_inline with include
paths, whose files the key cannot see) keep torch's builder under a name hashed from the call.

Runs in the runner, beside the candidate. The shared cache is read-only to a sandboxed candidate: its builds
go to a private build directory and the host promotes them afterwards (sandbox/build/cache.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

BUILT_MODULES: set[str] = set()
# The symbol check's refusals in this runner (sandbox/build/symbols.py), first first: the runner turns the first
# into its verdict (runner/serve.py, runner/step.py) even when the candidate's code caught the exception.
REFUSED: list[str] = []


class NativeRefused(RuntimeError):
    """A built module imports what kernel extensions may not (the symbol check): it was not loaded."""


def _checked_import(orig: Callable[..., Any]) -> Callable[..., Any]:
    """torch's `_import_module_from_library` (every load of a built extension, torch's builder's and ours) with
    the symbol check before the module is opened: a refused module is never loaded, so none of its code runs."""
    from kevolve.sandbox.build.symbols import check_module

    @functools.wraps(orig)
    def load(module_name: str, path: str, is_python_module: bool) -> Any:
        from torch.utils import cpp_extension

        checked = check_module(Path(path) / f"{module_name}{cpp_extension.LIB_EXT}")
        if not checked.ok:
            why = checked.reason()
            if checked.infra:  # retried, not scored: a busy machine or a missing tool is no verdict on the candidate
                why = f"infra_error: the symbol check could not read built modules here ({checked.error[:160]})"
            REFUSED.append(why)
            raise NativeRefused(why)
        return orig(module_name, path, is_python_module)

    return load


def _key(name: str, parts: dict[str, Any]) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return f"{name}_{hashlib.sha256(blob).hexdigest()[:16]}"


def wrap_extension(module: Any) -> Any:
    from kevolve.sandbox.runner.ablation import wrap_extension as wrap

    return wrap(module)


def _wrap(orig: Callable[..., Any], shared: Path, private: Path, kind: str) -> Callable[..., Any]:
    """torch's builder under a name unique to its arguments (file-based `load`, and load_inline calls
    the fast path does not take), loaded from the candidate's scope in the cache when built before."""
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
        return wrap_extension(module)  # calls through; replaces results only in an ablation call

    return build


def device_arch() -> str:
    """Compute capability of the current CUDA device ("9.0"), or "" without one: part of the key."""
    import torch

    if not torch.cuda.is_available():
        return ""
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


def _run_here(argv: list[str], cwd: Path, timeout_s: float) -> Any:
    """Compiler commands inside the worker: already confined, and in the worker's process group."""
    import subprocess
    import time

    from kevolve.sandbox.build.recipe import StepResult

    t0 = time.monotonic()
    try:
        r = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout_s)
        return StepResult(r.returncode, time.monotonic() - t0, r.stdout[-16000:].decode(errors="replace"))
    except subprocess.TimeoutExpired:
        return StepResult(None, time.monotonic() - t0, "timed out")


def _wrap_inline(orig: Callable[..., Any], cache_dir: Path, shared: Path, private: Path) -> Callable[..., Any]:
    """load_inline through the content key: the service's artifact, else this scope's, else the fast recipe."""
    from kevolve.sandbox.build.extensions import ExtensionSpec
    from kevolve.sandbox.build.recipe import BuildTarget, artifact_dir, module_name

    legacy = _wrap(orig, shared, private, "load_inline")

    @functools.wraps(orig)
    def load_inline(*args: Any, **kwargs: Any) -> Any:
        from torch.utils import cpp_extension

        try:
            spec = ExtensionSpec.from_call(args, kwargs)
        except (TypeError, ValueError):
            return orig(*args, **kwargs)  # torch reports a malformed call the way it always has
        if spec.extra_include_paths or not spec.is_python_module:
            return legacy(*args, **kwargs)  # reads files the key cannot see, or is not a Python module
        target = BuildTarget.current(device_arch())
        key = spec.key(target)
        mod = module_name(key)
        for where in (artifact_dir(cache_dir, key), shared / mod):
            if (where / f"{mod}.so").is_file():
                try:
                    module = cpp_extension._import_module_from_library(mod, str(where), True)
                except ImportError:
                    continue  # unusable here: build it
                BUILT_MODULES.add(mod)
                return wrap_extension(module)
        module = _build_here(spec, target, mod, cache_dir, private / mod)
        BUILT_MODULES.add(mod)
        return wrap_extension(module)  # calls through; replaces results only in an ablation call

    return load_inline


def _build_here(spec: Any, target: Any, mod: str, cache_dir: Path, work: Path) -> Any:
    """Build with the fast recipe into the private build dir (promoted later under the scope)."""
    from torch.utils import cpp_extension

    from kevolve.sandbox.build.recipe import Toolchain, build, ensure_shim, pch_id, shim_dir

    tc = Toolchain.detect()
    pch = cache_dir / "pch" / pch_id(tc, spec, target)
    pch_dir = pch if (pch / "torch" / "extension.h.gch").is_file() else None
    shim = None
    if spec.cuda_sources:
        shim = shim_dir(cache_dir, tc)
        if not shim.is_dir():
            shim = ensure_shim(work.parent.parent, tc)  # the cache is read-only here: a private copy
    got = build(spec, target, mod, work, _run_here, pch_dir=pch_dir, shim=shim)
    if not got.ok:
        shutil.rmtree(work, ignore_errors=True)  # nothing half-built gets promoted
        raise RuntimeError(f"Error building extension '{spec.name}':\n{got.log}")
    for f in work.iterdir():  # only the module is kept (and promoted)
        if f.is_dir() and not f.is_symlink():
            shutil.rmtree(f, ignore_errors=True)
        elif f.name != f"{mod}.so":
            f.unlink()
    return cpp_extension._import_module_from_library(mod, str(work), True)


def install_build_hooks(cache_dir: Path, build_dir: Path | None = None, scope: str = "",
                        check_symbols: bool = True) -> None:
    """Route the candidate's extension builds through the content-addressed cache.

    `load_inline` imports the build service's artifact for its content key when there is one
    (`extensions/by-source/<key>`, no compiler run), else this scope's earlier build, else builds
    with the fast recipe. `cache_dir` is read from; builds are written under `build_dir` (when the
    cache is read-only to the candidate) or straight into the cache (no sandbox: nothing to protect).
    With `check_symbols` (off only where the policy allows native code), every module is checked by the symbol
    check before it is loaded, wherever it came from: a refusal is recorded in REFUSED.
    """
    from torch.utils import cpp_extension

    out = build_dir or cache_dir
    shared, private = cache_dir / "extensions" / scope, out / "extensions" / scope
    private.mkdir(parents=True, exist_ok=True)
    os.environ["TORCH_EXTENSIONS_DIR"] = str(private)
    # CuPy's kernel cache beside the builds (not the launcher's scratch/cupy): its NVRTC output is promoted with
    # them under the scope. Named here rather than from kevolve/languages.py, which lists every language's cache
    # for the launcher; a language whose compiled kernels should be promoted the same way needs a line here too.
    os.environ["CUPY_CACHE_DIR"] = str(out / "cupy")
    cpp_extension.load_inline = _wrap_inline(cpp_extension.load_inline, cache_dir, shared, private)
    cpp_extension.load = _wrap(cpp_extension.load, shared, private, "load")
    if check_symbols:  # the one function torch's builders and ours load every built module through
        cpp_extension._import_module_from_library = _checked_import(cpp_extension._import_module_from_library)


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
