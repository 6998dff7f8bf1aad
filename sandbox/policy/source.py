"""Checks on candidate source that need no execution (run in the orchestrator, no torch)."""

from __future__ import annotations

import ast
import re
from kevolve.contract import parse_python
from kevolve.languages import LANGUAGES


_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_CUDA_KERNEL = re.compile(r"__global__\s+[\w:<>\s\*]*?\b(\w+)\s*\(")
_CPP_FUNCTIONS = re.compile(r"functions\s*=\s*\[([^\]]*)\]")
# each kernel language's own ways of naming a kernel (kevolve/languages.py)
_DECORATORS = tuple(d for lang in LANGUAGES.values() for d in lang.kernel_decorators)
_NAME_PATTERNS = tuple(re.compile(p) for lang in LANGUAGES.values() for p in lang.kernel_name_patterns)


def _aliases(tree: ast.Module, dotted: str) -> tuple[set[str], set[str]]:
    """(names bound to the decorator's module, names bound to the decorator itself) by the source's imports:
    `import triton`, `import triton as tr`, `from triton import jit as j` for "triton.jit"."""
    module, attr = dotted.rsplit(".", 1)
    modules, direct = {module}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == module}
        elif isinstance(node, ast.ImportFrom) and node.module == module:
            direct |= {a.asname or a.name for a in node.names if a.name == attr}
    return modules, direct


def decorated_kernel_names(source: str) -> set[str]:
    """Functions a kernel language compiles, by their decorator however it was imported (`@triton.jit`,
    `@triton.jit(...)`, `from triton import jit`, `import triton as tr`), under other decorators (autotune,
    heuristics) or not. The name is the kernel's name on the device: Triton compiles `def relu_k` to the
    entry `relu_k`."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for dotted in _DECORATORS:
        modules, direct = _aliases(tree, dotted)
        attr = dotted.rsplit(".", 1)[1]

        def is_kernel(d: ast.expr) -> bool:
            d = d.func if isinstance(d, ast.Call) else d
            if isinstance(d, ast.Name):
                return d.id in direct
            return (isinstance(d, ast.Attribute) and d.attr == attr and isinstance(d.value, ast.Name)
                    and d.value.id in modules)

        found |= {n.name for n in ast.walk(tree)
                  if isinstance(n, ast.FunctionDef) and any(map(is_kernel, n.decorator_list))}
    return found


# CuPy's generated kernels: the device name is the `name` argument (ElementwiseKernel's fourth, ReductionKernel's
# seventh); without one CuPy's default, which is no name of the candidate's
_CUPY_GENERATED = {"ElementwiseKernel": 3, "ReductionKernel": 6}


def generated_kernel_names(source: str) -> set[str]:
    """Names the candidate gives CuPy's generated kernels (`cp.ElementwiseKernel(..., "relu_ew")`, `name=`): an honest
    ElementwiseKernel was `no_custom_kernel` where only `__global__` and RawKernel names were read (red team 9)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        kind = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if kind not in _CUPY_GENERATED:
            continue
        named = [k.value for k in n.keywords if k.arg == "name"]
        pos = n.args[_CUPY_GENERATED[kind]] if len(n.args) > _CUPY_GENERATED[kind] else None
        for v in (*named, pos):
            if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value.isidentifier():
                found.add(v.value)
    return found


def custom_kernel_names(source: str) -> tuple[str, ...]:
    """Names of kernels / extension functions the candidate defines itself."""
    names = (set(_CUDA_KERNEL.findall(_LAUNCH_BOUNDS.sub(" ", source))) | decorated_kernel_names(source)
             | generated_kernel_names(source))
    for pattern in _NAME_PATTERNS:
        names |= set(pattern.findall(source))
    for group in _CPP_FUNCTIONS.findall(source):
        names |= set(re.findall(r"['\"](\w+)['\"]", group))
    return tuple(sorted(n for n in names if n not in {"if", "for", "while", "return"}))


def policy_reason(source: str, allow: tuple[str, ...] | frozenset[str] = ()) -> str | None:
    """The candidate policy's one-line reason (`policy_<category>: …`) for a source that parses, or
    None when it may run. Call after kevolve.contract.check_solution_source; the verdict is `rejected`."""
    from kevolve.sandbox.policy.candidate import check_policy

    violation = check_policy(source, frozenset(allow))
    return violation.reason if violation is not None else None

