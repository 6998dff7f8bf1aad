"""Evaluate a small, side-effect-free subset of Python expressions over a module's syntax tree.

Used by sandbox/build/extensions.py to read `load_inline` arguments without executing the candidate:
only literals and operations on them are ever computed here, never a call into the candidate's code.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections import Counter
from collections.abc import Iterator
from typing import Any

_MAX_TEXT = 4 * 2**20  # a statically evaluated string larger than this is not worth building ahead


class NotStatic(Exception):
    """An expression whose value needs the candidate's code to run."""


_CPP_EXT = "torch.utils.cpp_extension"
_WIDE = re.compile(r"\d{5,}")  # a format width/precision this large would only allocate memory


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted origin for the imports that can reach load_inline / load."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    names[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                if a.name == "*" and node.module == _CPP_EXT:
                    names.setdefault("load_inline", f"{_CPP_EXT}.load_inline")
                    names.setdefault("load", f"{_CPP_EXT}.load")
                else:
                    names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _resolve(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The dotted origin a callee refers to, through import aliases (None if not an import)."""
    dotted = _dotted(node)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    if head not in aliases:
        return None
    return f"{aliases[head]}.{rest}" if rest else aliases[head]


def extension_calls(tree: ast.Module) -> Iterator[tuple[str, ast.Call]]:
    """("load_inline" | "load", call) for every call of torch's extension builders, in source order."""
    aliases = _import_aliases(tree)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        origin = _resolve(call.func, aliases)
        if origin in (f"{_CPP_EXT}.load_inline", f"{_CPP_EXT}.load"):
            yield origin.rsplit(".", 1)[1], call


def _module_bindings(tree: ast.Module) -> tuple[dict[str, ast.expr], set[str]]:
    """Module-level `NAME = expr` assignments, and the names bound more than once (or `global`)."""
    stores: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            stores[node.id] += 1
        elif isinstance(node, ast.Global):
            stores.update({n: 2 for n in node.names})
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            stores[node.name] += 1
        elif isinstance(node, ast.alias):
            stores[(node.asname or node.name).split(".")[0]] += 1
    single: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            single[stmt.targets[0].id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            single[stmt.target.id] = stmt.value
    rebound = {n for n, c in stores.items() if c > 1}
    return single, rebound


class Evaluator:
    """Values of literal expressions in one module (names: module-level, bound once)."""

    def __init__(self, tree: ast.Module) -> None:
        self.aliases = _import_aliases(tree)
        self.bindings, self.rebound = _module_bindings(tree)
        self._cache: dict[str, Any] = {}
        self._busy: set[str] = set()

    def call_arguments(self, call: ast.Call) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword argument values of a call, or NotStatic."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            raise NotStatic("*args / **kwargs")
        args = tuple(self.value(a) for a in call.args)
        kwargs = {k.arg: self.value(k.value) for k in call.keywords if k.arg is not None}
        return args, kwargs

    def value(self, node: ast.expr) -> Any:
        """The value of `node`, or NotStatic naming what needs the code to run."""
        out = self._value(node)
        if isinstance(out, str) and len(out) > _MAX_TEXT:
            raise NotStatic("string too large")
        return out

    def _value(self, node: ast.expr) -> Any:  # noqa: PLR0911 - one case per node kind
        if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float | bool | type(None)):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.List | ast.Tuple):
            return [self.value(e) for e in node.elts] if isinstance(node, ast.List) else \
                tuple(self.value(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise NotStatic("dict unpacking")
            return {self.value(k): self.value(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
        if isinstance(node, ast.JoinedStr):
            return "".join(self._fstring_part(v) for v in node.values)
        if isinstance(node, ast.BinOp):
            return self._binop(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise NotStatic(f"{type(node).__name__} expression")

    def _name(self, name: str) -> Any:
        if name in self._cache:
            return self._cache[name]
        if name in self.rebound or name not in self.bindings:
            raise NotStatic(f"name {name!r} is not bound once to a literal at module level")
        if name in self._busy:
            raise NotStatic(f"name {name!r} refers to itself")
        self._busy.add(name)
        try:
            self._cache[name] = self.value(self.bindings[name])
        finally:
            self._busy.discard(name)
        return self._cache[name]

    def _fstring_part(self, v: ast.expr) -> str:
        if isinstance(v, ast.Constant):
            return str(v.value)
        if isinstance(v, ast.FormattedValue):
            spec = "" if v.format_spec is None else self.value(v.format_spec)
            _check_wide(spec)
            val = self._scalar(self.value(v.value))
            val = {-1: val, 115: str(val), 114: repr(val), 97: ascii(val)}[v.conversion]
            return format(val, spec)
        raise NotStatic("f-string part")

    def _binop(self, node: ast.BinOp) -> Any:
        left, right = self.value(node.left), self.value(node.right)
        if isinstance(node.op, ast.Add) and type(left) is type(right) and isinstance(left, str | list | tuple | int):
            return left + right
        if isinstance(node.op, ast.Mod) and isinstance(left, str):
            _check_wide(left)
            args = tuple(self._scalar(a) for a in right) if isinstance(right, tuple) else self._scalar(right)
            return left % args
        raise NotStatic(f"operator {type(node.op).__name__} on {type(left).__name__}")

    def _call(self, node: ast.Call) -> Any:
        origin = _resolve(node.func, self.aliases)
        if origin == "textwrap.dedent" and len(node.args) == 1 and not node.keywords:
            return textwrap.dedent(_as_str(self.value(node.args[0])))
        if not isinstance(node.func, ast.Attribute):
            raise NotStatic(f"call of {_dotted(node.func) or 'an expression'}")
        method = node.func.attr
        base = self.value(node.func.value)
        args, kwargs = self.call_arguments(node)
        if not isinstance(base, str):
            raise NotStatic(f".{method}() on {type(base).__name__}")
        if method == "format":
            _check_wide(base)
            return base.format(*[self._scalar(a) for a in args], **{k: self._scalar(v) for k, v in kwargs.items()})
        if method == "join" and len(args) == 1 and not kwargs:
            return base.join(_as_str(x) for x in _as_seq(args[0]))
        if method in ("strip", "lstrip", "rstrip") and len(args) <= 1 and not kwargs:
            return getattr(base, method)(*[_as_str(a) for a in args])
        if method == "replace" and len(args) == 2 and not kwargs:
            return base.replace(_as_str(args[0]), _as_str(args[1]))
        raise NotStatic(f"str.{method}()")

    @staticmethod
    def _scalar(v: Any) -> Any:
        if isinstance(v, int) and abs(v) > 10**6:  # could be a width: "{:{}}".format(x, 10**9)
            raise NotStatic("formatting a huge number")
        if isinstance(v, str | int | float | bool):
            return v
        raise NotStatic(f"formatting a {type(v).__name__}")


def _check_wide(fmt: str) -> None:
    if _WIDE.search(fmt):
        raise NotStatic("format with a huge width")


def _as_str(v: Any) -> str:
    if not isinstance(v, str):
        raise NotStatic(f"expected a string, got {type(v).__name__}")
    return v


def _as_seq(v: Any) -> list[Any] | tuple[Any, ...]:
    if not isinstance(v, list | tuple):
        raise NotStatic(f"expected a list, got {type(v).__name__}")
    return v


__all__ = ["Evaluator", "NotStatic", "extension_calls"]
