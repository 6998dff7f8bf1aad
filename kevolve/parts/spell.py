"""A submodule of a model written back as source: its constructor call, and the problem's definitions it needs.

Constructor arguments are recorded as the model is built (`recording`: every `nn.Module` made meanwhile, with the
arguments its class was called with), then spelled as Python (`spell`): literals as themselves, a module argument
(`BasicBlock(64, 64, 1, downsample)`) as its own recorded constructor call. What has no spelling (a tensor, an
object of another kind, a module made by `copy.deepcopy`, whose constructor saw no arguments) raises `Unspellable`;
the caller checks what it spelled by building it (decompose.py), so a wrong spelling never becomes a part.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import math
import sys
import types
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch

from kevolve.contract import parse_python

_OWN = ("Model", "get_inputs", "get_init_inputs")  # the problem's own names: never part of a part's source


class Unspellable(ValueError):
    """A constructor argument with no spelling as source; the message says which."""


class Made(NamedTuple):
    """A module's construction: the arguments of its class's `__init__`, defaults filled in."""

    module: Any
    cls: type
    named: tuple[tuple[str, Any], ...]
    """the named parameters (positional or keyword, then keyword-only) in the signature's order, with their values"""
    varargs: tuple
    varkw: dict[str, Any]


@contextlib.contextmanager
def recording() -> Iterator[dict[int, Made]]:
    """While open, every nn.Module created in this thread is recorded: id(module) -> Made, the arguments its class
    was called with.

    Read from the frame of the first `__init__` that runs for each module (the class's own: a subclass's
    `super().__init__(...)` with other arguments comes later), through `sys.setprofile`. The record holds each module,
    so no id is reused while it is open (a temporary module's id given to a later one). Patching `nn.Module.__new__`
    would see the arguments too, but CPython cannot undo that patch (object.__new__ then refuses arguments)."""
    made: dict[int, Made] = {}
    before = sys.getprofile()

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if event != "call" or code.co_name != "__init__" or not code.co_argcount:
            return
        local = frame.f_locals
        obj = local.get(code.co_varnames[0])
        if not isinstance(obj, torch.nn.Module) or id(obj) in made:
            return
        names = code.co_varnames
        n = code.co_argcount + code.co_kwonlyargcount
        named = tuple((k, local[k]) for k in names[1:n])
        varargs: tuple = ()
        varkw: dict[str, Any] = {}
        if code.co_flags & inspect.CO_VARARGS:
            varargs = tuple(local[names[n]])
            n += 1
        if code.co_flags & inspect.CO_VARKEYWORDS:
            varkw = dict(local[names[n]])
        made[id(obj)] = Made(obj, type(obj), named, varargs, varkw)

    sys.setprofile(profile)
    try:
        yield made
    finally:
        sys.setprofile(before)


def class_name(cls: type, ns: dict[str, Any]) -> str:
    """How source refers to `cls`: by its name when the problem defines it, else torch.nn's or its module's path."""
    if ns.get(cls.__name__) is cls:
        return cls.__name__
    if getattr(torch.nn, cls.__name__, None) is cls:
        return f"torch.nn.{cls.__name__}"
    if cls.__module__.startswith("torch.") and "<" not in cls.__qualname__:
        return f"{cls.__module__}.{cls.__qualname__}"
    raise Unspellable(f"{cls.__qualname__} is neither the problem's nor torch's")


def _defaults(cls: type) -> dict[str, Any]:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return {}
    return {k: p.default for k, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}


def _is_default(value: Any, default: Any) -> bool:
    if value is default:
        return True
    plain = (bool, int, float, str, tuple, type(None))
    return isinstance(value, plain) and type(value) is type(default) and value == default


def _call(m: Made, made: dict[int, Made], ns: dict[str, Any]) -> str:
    """`Class(required, ..., changed=value)`: arguments left at their default are left out (all of them
    positional where the call has *args)."""
    defaults = _defaults(m.cls)
    pos, kw = [], []
    for name, value in m.named:
        if m.varargs or (not kw and name not in defaults):
            pos.append(spell(value, made, ns))
        elif name not in defaults or not _is_default(value, defaults[name]):
            kw.append(f"{name}={spell(value, made, ns)}")
    pos += [spell(v, made, ns) for v in m.varargs]
    kw += [f"{k}={spell(v, made, ns)}" for k, v in m.varkw.items()]
    return f"{class_name(m.cls, ns)}({', '.join(pos + kw)})"


def spell(value: Any, made: dict[int, Made], ns: dict[str, Any]) -> str:
    """`value` as a Python expression (a module as its recorded constructor call); Unspellable where it has none."""
    if isinstance(value, torch.nn.Module):
        if id(value) not in made:
            raise Unspellable(f"a {type(value).__name__} made before the model")
        return _call(made[id(value)], made, ns)
    if isinstance(value, type) and issubclass(value, torch.nn.Module):  # `norm_layer=nn.LayerNorm`
        return class_name(value, ns)
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.Size):
        return f"torch.Size({spell(tuple(value), made, ns)})"
    if isinstance(value, tuple):
        inner = ", ".join(spell(v, made, ns) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(spell(v, made, ns) for v in value) + "]"
    if isinstance(value, dict) and all(isinstance(k, (str, int)) for k in value):
        return "{" + ", ".join(f"{k!r}: {spell(v, made, ns)}" for k, v in value.items()) + "}"
    kind = "Tensor" if isinstance(value, torch.Tensor) else type(value).__name__  # a fake tensor too
    raise Unspellable(f"a constructor argument of type {kind}")


def _bound(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _used(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}


def definitions(source: str, names: set[str]) -> str:
    """The problem's imports, and its top-level definitions `names` need (transitively), in the file's order.

    Leaves out the problem's own Model, get_inputs and get_init_inputs, its docstring and any other statement
    (sizes for get_inputs, a `__main__` block): a part's source shows the part, not the whole model."""
    body = parse_python(source).body  # type: ignore[attr-defined]
    keep: set[int] = {i for i, s in enumerate(body) if isinstance(s, (ast.Import, ast.ImportFrom))}
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name in seen or name in _OWN:
            continue
        seen.add(name)
        for i, s in enumerate(body):
            if name in _bound(s) and i not in keep:
                keep.add(i)
                todo.extend(_used(s))
    return "\n\n".join(ast.get_source_segment(source, body[i]) or ast.unparse(body[i]) for i in sorted(keep))


def without(source: str, names: tuple[str, ...] = ("get_inputs", "get_init_inputs")) -> str:
    """`source` less its top-level definitions of `names` and its `if __name__ == "__main__"` block."""
    tree = parse_python(source)
    lines = source.splitlines(keepends=True)
    cut: list[tuple[int, int]] = []
    for s in tree.body:  # type: ignore[attr-defined]
        main = isinstance(s, ast.If) and "__main__" in ast.unparse(s.test)
        if main or _bound(s) & set(names) and isinstance(s, (ast.FunctionDef, ast.Assign)):
            first = min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])])
            cut.append((first - 1, s.end_lineno or s.lineno))
    for a, b in reversed(cut):
        del lines[a:b]
    return "".join(lines)
