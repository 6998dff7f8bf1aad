"""A part's spelled constructor call with its numbers as the part problem's constructor arguments.

`Block(64)` becomes `Model(channels)` building `Block(channels)`, with `get_init_inputs() == [64]`, as KernelBench
writes its problems: a part candidate then takes its sizes from its constructor, so a ResNet's blocks at 64 and at
128 channels are one family (the same part problem but for `get_init_inputs` and the input shapes) and a candidate
of one can be judged on the other. Numbers are arguments (negative ones, and tuples and lists of them, as one
argument each); booleans, strings, None, dtypes and classes stay written in the call (they choose what is built, not
its size). Each argument is named after the constructor parameter it is given to (keyword, or the callee's signature
for a positional one), else `arg<N>`; names repeat as `name_2`, …
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from kevolve.contract import parse_python


def _literal(node: ast.expr) -> bool:
    """A number (or a negative one), or a tuple / list of them; not a boolean (it chooses what is built)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _literal(node.operand) and not isinstance(node.operand, (ast.Tuple, ast.List))
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(_literal(e) and not isinstance(e, (ast.Tuple, ast.List)) for e in node.elts)
    return False


def _positional_names(func: ast.expr, ns: dict[str, Any]) -> list[str]:
    """The callee's positional parameter names (after `self`), or [] when it cannot be resolved in `ns`."""
    try:
        target = eval(compile(ast.Expression(func), "<part>", "eval"), ns)  # noqa: S307 — the user's own problem
        params = list(inspect.signature(target).parameters.values())
    except Exception:  # noqa: BLE001 — no signature: arguments are named by position
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in kinds and p.name != "self"]


def parameterised(spelled: str, ns: dict[str, Any]) -> tuple[str, tuple[str, ...], tuple[Any, ...]]:
    """(the call with its numbers replaced by argument names, the names, their values in order)."""
    tree = parse_python(spelled, mode="eval")
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names: list[str] = []
    values: list[Any] = []

    def name_for(node: ast.expr, hint: str) -> ast.Name:
        base = hint if hint.isidentifier() and hint not in taken else f"{hint}_" if hint.isidentifier() else "arg"
        name, k = base, 2
        while name in names or name in taken:
            name, k = f"{base}_{k}", k + 1
        names.append(name)
        values.append(ast.literal_eval(node))
        return ast.Name(id=name, ctx=ast.Load())

    class Arguments(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            positional = _positional_names(node.func, ns)
            node.args = [name_for(a, positional[i] if i < len(positional) else f"arg{len(names)}") if _literal(a)
                         else self.visit(a) for i, a in enumerate(node.args)]
            for kw in node.keywords:
                kw.value = name_for(kw.value, kw.arg or "kwargs") if _literal(kw.value) else self.visit(kw.value)
            return node

    body = Arguments().visit(tree).body  # type: ignore[attr-defined]
    if not isinstance(body, ast.Call):  # not a call (cannot happen for a spelled module): nothing to take out
        return spelled, (), ()
    return ast.unparse(body), tuple(names), tuple(values)


__all__ = ["parameterised"]
