"""The compiler and linker flags a candidate may hand to a compiler: an allowlist, one home for the policy and the
build service (runs in the parent; reads the candidate's flags, never runs them).

A flag off the list is a finding whatever it does: response files (`@file`), `-wrapper`, `-fplugin`, `-B`,
`-specs`, `-include` of a host file, linker scripts and entry points, dependency or map output, `-Xlinker` … could
run a program, read a file into the build log or write one; a list of what may pass cannot be outrun by the next
such option the way a list of what may not could. The list holds what real LLM-written kernels use (the 1,144
CUDA-L1 solutions, 2026-11-27: -O3, --use_fast_math, -Xptxas -v / -O3, --ptxas-options=-v, --maxrregcount,
-std=c++14, -ffast-math, -lcublas, --ftz, --fmad, -prec-div) and the common forms of nvcc's, NVRTC's and g++'s
optimisation, architecture, warning and macro options. Include directories and library paths are allowed here in
form; where they point is the native rules' (`native._include_dirs`) and this module's `_outside`.
"""

from __future__ import annotations

import re
import shlex

_SAFE = re.compile(
    r"^(-O[0-3sgz]?|-g[0-3]?|-G|-lineinfo|-{1,2}std=[\w+]+|-[DU]\w+(=[\w.+\-]*)?|-W(?![lap],)[\w\-=]*|-w|-v|-fPIC|"
    r"-f(no-)?(fast-math|openmp|unroll-loops|strict-aliasing|omit-frame-pointer|exceptions|rtti|"
    r"finite-math-only|tree-vectorize|permissive|math-errno)|-fopenmp-simd|-ffp-contract=\w+|-fvisibility=\w+|"
    r"-ftemplate-depth=\d+|-march=[\w\-]+|-mtune=[\w\-]+|-mavx\w*|-mfma|-msse\w*|-mf16c|"
    r"-{1,2}use_fast_math|--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda|"
    r"-arch|-arch=(sm|compute)_\w+|--gpu-architecture=(sm|compute)_\w+|-code=[\w,]+|(sm|compute)_\w+|"
    r"-gencode|-gencode=arch=compute_\w+,code=\[?[\w,]+\]?|arch=compute_\w+,code=\[?[\w,]+\]?|"
    r"-{1,2}ftz=(true|false)|-{1,2}prec-div=(true|false)|-{1,2}prec-sqrt=(true|false)|-{1,2}fmad=(true|false)|"
    r"-{1,2}maxrregcount=\d+|-res-usage|--resource-usage|--threads=?\d*|\d+|"
    r"-Xptxas=?[\w\-=,.]*|-Xcompiler|--compiler-options|--ptxas-options=[\w\-=,.]+|-Xcudafe=?[\w\-=,]*|"
    r"-default-device|--device-as-default-execution-space|-{1,2}(rdc|relocatable-device-code)=(true|false)|"
    r"-dopt=(on|off)|--extra-device-vectorization|-{1,2}restrict|-{1,2}diag-suppress=[\d,]+|"
    r"--display-error-number|--device-debug|"
    r"-(I|isystem|iquote|idirafter)\S+|--include-path=\S+|-L\S+|-l[\w.+\-]+|"
    r"-Wl,-{1,2}rpath,\S+|-Wl,--(no-)?as-needed|-fopenmp|-pthread)$")
_PASS_THROUGH = re.compile(r"^(-Xcompiler|--compiler-options)[= ](.*)$")
_PATH_FLAG = re.compile(r"^(?:-L|-Wl,-{1,2}rpath,)(\S+)$")
_FORBIDDEN = re.compile(r"^(?:~|/(?:proc|dev|etc|sys|root|home|tmp|run|var)\b)|\.\.")


def flag_ok(flag: str) -> bool:
    """One flag (as the compiler receives it) on the list; nvcc's host pass-through (-Xcompiler=a,b) piece by
    piece; a library path not under the user's or the system's private folders."""
    m = _PASS_THROUGH.match(flag)
    if m:
        return all(flag_ok(part) for part in m.group(2).split(",") if part)
    path = _PATH_FLAG.match(flag)
    if path and _FORBIDDEN.search(path.group(1)):
        return False
    return bool(_SAFE.match(flag))


def unsafe_flags(texts: list[str]) -> list[str]:
    """The flags off the list among `texts` (each split as the shell would split torch's ninja line; an unbalanced
    quote is itself unsafe)."""
    bad: list[str] = []
    for text in texts:
        try:
            tokens = shlex.split(text)
        except ValueError:
            bad.append(text)
            continue
        bad += [t for t in tokens if not flag_ok(t)]
    return bad


__all__ = ["flag_ok", "unsafe_flags"]
