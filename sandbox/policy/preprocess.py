"""A candidate's native text as the compiler reads it (runs in the parent): preprocessed by the system's C
preprocessor, so the candidate's own macros are expanded, then adjacent string literals joined as translation
phase 6 joins them. The native rules scan this view as well as the text as written (native.scan_source), so a
call spelled through a macro (`#define F fo##pen` is token pasting, refused anyway; `#define F fopen` then `F(p)`)
or a name split into adjacent literals (`__asm__("fo" "pen")`, the second red team's) is seen as the compiler
sees it.

`#include` lines are dropped first (the rules check them as written; a header's text is not the candidate's),
and the preprocessor runs with no include path, nothing predefined but its own, a time limit, and — where the
kernel has Landlock — reads confined to the toolchain (isolate/landlock.py's launcher). Where no preprocessor is
installed the text as written is all there is to scan (`available()` says so; `kevolve doctor` shows `cpp`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile

_INCLUDE_LINE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*(?:include|include_next|import|embed)\b[^\n]*$", re.M)
_ADJACENT = re.compile(r'"\s*(?:L|u8|u|U)?"')  # the end of one literal and the start of the next
_LIMIT_S = 10.0
_MAX_OUT = 4 * 2**20


@functools.cache
def _cpp() -> list[str] | None:
    for exe, args in (("cpp", []), ("g++", ["-E"]), ("clang", ["-E"])):
        path = shutil.which(exe)
        if path:
            return [path, *args]
    return None


def available() -> bool:
    """Whether a C preprocessor is installed (else only the text as written is scanned)."""
    return _cpp() is not None


@functools.cache
def _confine_prefix(work: str) -> list[str]:
    from kevolve.sandbox.isolate import landlock

    if landlock.abi() <= 0:
        return []
    return landlock.launcher(work)


@functools.lru_cache(maxsize=512)
def preprocessed(spliced: str, macros: tuple[str, ...] = ()) -> str | None:
    """`spliced` (backslash-newlines already joined, so no directive hides across lines) after the preprocessor,
    with the candidate's own `-D`/`-U` flags (`macros`), adjacent literals joined; None where it cannot be had (no
    preprocessor, an error, a time-out, an output too large: the rules then see the text as written only)."""
    cpp = _cpp()
    if cpp is None:
        return None
    source = _INCLUDE_LINE.sub("", spliced)
    with tempfile.TemporaryDirectory(prefix="kevolve-cpp-") as work:
        argv = [*_confine_prefix(work), *cpp, "-P", "-nostdinc", "-x", "c++", "-D__CUDACC__", "-D__NVCC__", *macros,
                "-"]
        try:
            done = subprocess.run(argv, input=source, capture_output=True, text=True, timeout=_LIMIT_S, cwd=work,
                                  env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"})
        except (OSError, subprocess.TimeoutExpired):
            return None
    if done.returncode != 0 or len(done.stdout) > _MAX_OUT:
        return None
    return _ADJACENT.sub("", done.stdout)


__all__ = ["available", "preprocessed"]
