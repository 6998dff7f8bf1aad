"""What a candidate's `load_inline` extensions are built from, read from its source without running it.

`extract(source)` walks the candidate's syntax tree, finds its `load_inline` calls (under any import
alias) and evaluates their arguments statically: literals, module-level names bound once to a
literal, `+`, f-strings, `.format` / `%` / `.join` over literal parts, lists, tuples, dicts and
`textwrap.dedent`. Anything else makes that call "not statically known": the extension is then
built inside the evaluation worker, as before (slower, still correct).

`ExtensionSpec.from_call(args, kwargs)` is the one converter from a `load_inline` call to a spec:
the extractor and the worker's hook (sandbox/build/compile.py) both use it, so the same call gives the
same `key` on both sides.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from typing import Any

from pydantic import Field

from kevolve.records import Record
from kevolve.contract import parse_python
from kevolve.sandbox.policy.flags import flag_ok
from kevolve.sandbox.build.static_eval import Evaluator, NotStatic, extension_calls

# load_inline's parameters, in order (torch 2.x).
_PARAMS = ("name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags",
           "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags", "extra_include_paths", "build_directory",
           "verbose", "with_cuda", "with_sycl", "is_python_module", "with_pytorch_error_handling",
           "keep_intermediates", "use_pch", "no_implicit_headers")
# Arguments that change where or how noisily torch builds, not what it builds.
_IGNORED = {"build_directory", "verbose", "keep_intermediates", "use_pch"}

class ExtensionSpec(Record):
    """One `load_inline` call's arguments: everything its built module depends on, plus its name."""

    name: str = Field(description="the extension name the candidate chose (not part of the key)")
    cpp_sources: tuple[str, ...] = Field(default=(), description="C++ source texts, as passed")
    cuda_sources: tuple[str, ...] = Field(default=(), description="CUDA source texts, as passed")
    functions: tuple[tuple[str, str], ...] | None = Field(
        default=None, description="(function, docstring) pairs that get pybind11 bindings; None = none")
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    extra_include_paths: tuple[str, ...] = ()
    with_cuda: bool | None = Field(default=None, description="None = whenever there are CUDA sources")
    is_python_module: bool = True
    with_pytorch_error_handling: bool = True
    no_implicit_headers: bool = False

    @classmethod
    def from_call(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ExtensionSpec:
        """The spec of a `load_inline(*args, **kwargs)` call; TypeError/ValueError when torch would refuse it."""
        bound = _bind(args, kwargs)
        if bound.get("sycl_sources") or bound.get("with_sycl"):
            raise ValueError("SYCL extensions are not handled")
        return cls(name=_text(bound["name"], "name"), cpp_sources=_texts(bound.get("cpp_sources"), "cpp_sources"),
                   cuda_sources=_texts(bound.get("cuda_sources"), "cuda_sources"),
                   functions=_functions(bound.get("functions")),
                   extra_cflags=_flags(bound.get("extra_cflags"), "extra_cflags"),
                   extra_cuda_cflags=_flags(bound.get("extra_cuda_cflags"), "extra_cuda_cflags"),
                   extra_ldflags=_flags(bound.get("extra_ldflags"), "extra_ldflags"),
                   extra_include_paths=_texts(bound.get("extra_include_paths"), "extra_include_paths"),
                   with_cuda=_flag(bound.get("with_cuda"), None), is_python_module=_flag(bound.get("is_python_module"), True),
                   with_pytorch_error_handling=_flag(bound.get("with_pytorch_error_handling"), True),
                   no_implicit_headers=_flag(bound.get("no_implicit_headers"), False))

    @property
    def uses_cuda(self) -> bool:
        """Whether nvcc and the CUDA libraries take part (torch's own rule)."""
        return self.with_cuda if self.with_cuda is not None else bool(self.cuda_sources)

    def key(self, target: Record) -> str:
        """Content hash of everything that affects the artifact (never the extension's name).

        `target` is the recipe's BuildTarget (torch, CUDA, Python, architecture, recipe version); the
        architecture only counts for CUDA extensions.
        """
        parts = self.model_dump(exclude={"name"})
        tgt = target.model_dump()
        if not self.uses_cuda:
            tgt.pop("arch", None)
        blob = json.dumps({"spec": parts, "target": tgt}, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:24]

    def unsafe_reason(self) -> str:
        """Why the build service will not compile this for a candidate it has not run ('' = it will)."""
        if self.extra_include_paths:
            return "extra_include_paths: the build would read files outside its sources"
        if not self.is_python_module:
            return "is_python_module=False: a torch.ops library, loaded differently"
        for flag in (*self.extra_cflags, *self.extra_cuda_cflags, *self.extra_ldflags):
            if not flag_ok(flag.strip()):  # the policy's allowlist (policy/flags.py): the service builds no other
                return f"compiler flag {flag.strip()[:60]!r} is not on the allowlist"
        return ""


class Extraction(Record):
    """What static reading found in one candidate source."""

    specs: tuple[ExtensionSpec, ...] = Field(default=(), description="load_inline calls evaluated statically")
    unknown: tuple[str, ...] = Field(default=(), description="one reason per extension call not statically known")


def _bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    if len(args) > len(_PARAMS):
        raise TypeError("load_inline takes at most %d positional arguments" % len(_PARAMS))
    bound = dict(zip(_PARAMS, args, strict=False))
    for k, v in kwargs.items():
        if k not in _PARAMS or k in bound:
            raise TypeError(f"load_inline: unexpected or repeated argument {k!r}")
        bound[k] = v
    if "name" not in bound:
        raise TypeError("load_inline: missing 'name'")
    return {k: v for k, v in bound.items() if k not in _IGNORED}


def _text(v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{what} must be a string, not {type(v).__name__}")
    return v


def _texts(v: Any, what: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str):
        return (v,)
    if isinstance(v, list | tuple):
        return tuple(_text(x, what) for x in v)
    raise TypeError(f"{what} must be a string or a list of strings, not {type(v).__name__}")


def _flags(v: Any, what: str) -> tuple[str, ...]:
    """Compiler or linker flags as the compiler receives them from torch.

    torch strips each flag and joins them with spaces into its ninja file, whose command lines a shell
    splits: `[""]` (KernelBench's own template passes `extra_cflags=[""], extra_ldflags=[""]`) is no flag
    at all, and `"-O3 --use_fast_math"` is two. kevolve runs compilers without a shell, so the split
    happens here (shell quoting rules, no expansion); unbalanced quotes are refused, as the shell would.
    """
    out: list[str] = []
    for flag in _texts(v, what):
        try:
            out.extend(shlex.split(flag))
        except ValueError as e:
            raise ValueError(f"{what}: {flag[:60]!r}: {e}") from None
    return tuple(out)


def _functions(v: Any) -> tuple[tuple[str, str], ...] | None:
    if v is None:
        return None
    if isinstance(v, str):
        v = [v]
    if isinstance(v, list | tuple):
        return tuple((_text(f, "functions"), f) for f in v)
    if isinstance(v, dict):
        return tuple((_text(k, "functions"), _text(d, "functions")) for k, d in v.items())
    raise ValueError(f"functions must be a list or dict, not {type(v).__name__}")


def _flag(v: Any, default: bool | None) -> Any:
    if v is None:
        return default
    if not isinstance(v, bool):
        raise TypeError(f"expected a bool, not {type(v).__name__}")
    return v


def extract(source: str) -> Extraction:
    """Every `load_inline` call in `source`, with its arguments evaluated without running anything."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError) as e:
        return Extraction(unknown=(f"syntax: {e}",))
    ev = Evaluator(tree)
    specs: list[ExtensionSpec] = []
    unknown: list[str] = []
    for kind, call in extension_calls(tree):
        line = getattr(call, "lineno", 0)
        if kind != "load_inline":
            unknown.append(f"line {line}: {kind} (file-based) is built by the worker")
            continue
        try:
            args, kwargs = ev.call_arguments(call)
            specs.append(ExtensionSpec.from_call(args, kwargs))
        except (NotStatic, TypeError, ValueError) as e:
            unknown.append(f"line {line}: {e}")
    return Extraction(specs=tuple(specs), unknown=tuple(unknown))


__all__ = ["ExtensionSpec", "Extraction", "extract"]
