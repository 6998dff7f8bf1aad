"""Checks on candidate source that need no execution (run in the orchestrator, no torch)."""

from __future__ import annotations

import ast
import re
from kevolve.contract import parse_python


_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_CUDA_KERNEL = re.compile(r"__global__\s+[\w:<>\s\*]*?\b(\w+)\s*\(")
_TRITON_KERNEL = re.compile(r"@triton\.(?:jit|autotune[\s\S]*?@triton\.jit)[^\n]*\n\s*def\s+(\w+)")
_CUPY_NAME = re.compile(r"(?:RawKernel\s*\([\s\S]*?,\s*|get_function\s*\(\s*)['\"](\w+)['\"]")
_CPP_FUNCTIONS = re.compile(r"functions\s*=\s*\[([^\]]*)\]")


def _triton_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names bound to the triton module, names bound to triton.jit) by the source's imports."""
    modules, jits = {"triton"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "triton"}
        elif isinstance(node, ast.ImportFrom) and node.module == "triton":
            jits |= {a.asname or a.name for a in node.names if a.name == "jit"}
    return modules, jits


def triton_kernel_names(source: str) -> set[str]:
    """Functions decorated with triton.jit however it was imported (`@triton.jit`, `@triton.jit(...)`,
    `from triton import jit`, `import triton as tr`), under autotune / heuristics decorators or not.
    The name is the kernel's name on the device: Triton compiles `def relu_k` to the entry `relu_k`."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return set(_TRITON_KERNEL.findall(source))
    modules, jits = _triton_aliases(tree)

    def is_jit(d: ast.expr) -> bool:
        d = d.func if isinstance(d, ast.Call) else d
        if isinstance(d, ast.Name):
            return d.id in jits
        return (isinstance(d, ast.Attribute) and d.attr == "jit" and isinstance(d.value, ast.Name)
                and d.value.id in modules)

    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and any(map(is_jit, n.decorator_list))}


def custom_kernel_names(source: str) -> tuple[str, ...]:
    """Names of kernels / extension functions the candidate defines itself."""
    names = set(_CUDA_KERNEL.findall(_LAUNCH_BOUNDS.sub(" ", source))) | triton_kernel_names(source)
    names |= set(_CUPY_NAME.findall(source))
    for group in _CPP_FUNCTIONS.findall(source):
        names |= set(re.findall(r"['\"](\w+)['\"]", group))
    return tuple(sorted(n for n in names if n not in {"if", "for", "while", "return"}))


def policy_reason(source: str, allow: tuple[str, ...] | frozenset[str] = ()) -> str | None:
    """The candidate policy's one-line reason (`policy_<category>: …`) for a source that parses, or
    None when it may run. Call after kevolve.contract.check_solution_source; the verdict is `rejected`."""
    from kevolve.sandbox.policy.candidate import check_policy

    violation = check_policy(source, frozenset(allow))
    return violation.reason if violation is not None else None

