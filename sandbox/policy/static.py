"""Static evaluation of the string expressions a candidate builds its kernel sources from.

Only what can be known without running anything: literals, f-strings of constants, `+`, `*`, `%`,
`str.join/format/replace/strip`, `textwrap.dedent`, lists, and names assigned such values (a name
assigned several times stands for all its values, concatenated). Each piece of text keeps the Python
line it came from, so a finding inside a kernel source points at its own line.
"""

from __future__ import annotations

import ast
import operator
import string
import textwrap
from collections.abc import Callable
from dataclasses import dataclass


class NotStatic(Exception):
    """The expression's value depends on something only known at run time."""


@dataclass(frozen=True)
class Frag:
    """A piece of text and the Python line its first character came from."""

    text: str
    line: int


@dataclass(frozen=True)
class Text:
    """A string value made of fragments (concatenation keeps every fragment's line)."""

    frags: tuple[Frag, ...]

    @property
    def value(self) -> str:
        """The whole string."""
        return "".join(f.text for f in self.frags)

    def line_at(self, offset: int) -> int:
        """The Python line of the character at `offset` of `value`."""
        for f in self.frags:
            if offset < len(f.text):
                return f.line + f.text.count("\n", 0, offset)
            offset -= len(f.text)
        return self.frags[-1].line if self.frags else 0

    def __add__(self, other: Text) -> Text:
        return Text(self.frags + other.frags)


def plain(text: str, line: int) -> Text:
    """One fragment of text starting at `line`."""
    return Text((Frag(text, line),))


_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
          ast.Mod: operator.mod, ast.Div: operator.truediv, ast.Pow: operator.pow, ast.LShift: operator.lshift,
          ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitAnd: operator.and_}
_STR_METHODS = ("replace", "strip", "lstrip", "rstrip", "upper", "lower")


def _safe_format(fmt: str) -> bool:
    """A format string whose fields are plain names or positions (no attribute or index access)."""
    try:
        return all(f is None or f == "" or f.isidentifier() or f.isdigit()
                   for _, f, _, _ in string.Formatter().parse(fmt))
    except ValueError:
        return False


def _to_plain(v: object) -> object:
    if isinstance(v, Text):
        return v.value
    if isinstance(v, list):
        return [_to_plain(x) for x in v]
    if isinstance(v, (int, float, bool)) or v is None:
        return v
    raise NotStatic


class StaticEval:
    """Evaluate expressions over the module's simple assignments (`values`: name -> [(op, expr)])."""

    def __init__(self, values: dict[str, list[tuple[str, ast.expr]]], opaque: set[str],
                 resolve: Callable[[ast.expr], set[tuple[str, ...]]], own: Callable[[ast.expr], bool]) -> None:
        self.values, self.opaque, self.resolve, self.own = values, opaque, resolve, own
        self._busy: set[str] = set()

    def eval(self, node: ast.expr) -> object:
        """The static value (Text, number, list …) or raise NotStatic."""
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise NotStatic
        return method(node)

    def _Constant(self, n: ast.Constant) -> object:
        if isinstance(n.value, str):
            return plain(n.value, n.lineno)
        if isinstance(n.value, (int, float, bool)) or n.value is None:
            return n.value
        raise NotStatic

    def _JoinedStr(self, n: ast.JoinedStr) -> Text:
        out = Text(())
        for part in n.values:
            if isinstance(part, ast.Constant):
                out = out + plain(str(part.value), n.lineno)
                continue
            assert isinstance(part, ast.FormattedValue)
            v = _to_plain(self.eval(part.value))
            conv = {115: str, 114: repr, 97: ascii}.get(part.conversion, None)
            v = conv(v) if conv else v
            spec = self.eval(part.format_spec).value if part.format_spec is not None else ""  # type: ignore[union-attr]
            out = out + plain(format(v, spec), n.lineno)
        return out

    def _BinOp(self, n: ast.BinOp) -> object:
        a, b = self.eval(n.left), self.eval(n.right)
        if isinstance(a, Text) and isinstance(b, Text) and isinstance(n.op, ast.Add):
            return a + b
        if isinstance(a, Text) and isinstance(n.op, ast.Mod):
            args = _to_plain(b)
            return plain(a.value % (tuple(args) if isinstance(args, list) else args), n.lineno)
        if isinstance(a, Text) and isinstance(b, int) and isinstance(n.op, ast.Mult) and 0 <= b < 4096:
            return Text(a.frags * b)
        if isinstance(a, list) and isinstance(b, list) and isinstance(n.op, ast.Add):
            return a + b
        op = _ARITH.get(type(n.op))
        if op is None or not all(isinstance(x, (int, float)) for x in (a, b)):
            raise NotStatic
        if isinstance(n.op, (ast.Pow, ast.LShift)) and abs(b) > 64:  # type: ignore[arg-type]
            raise NotStatic
        try:
            return op(a, b)
        except ArithmeticError:
            raise NotStatic from None

    def _UnaryOp(self, n: ast.UnaryOp) -> object:
        v = self.eval(n.operand)
        if isinstance(v, (int, float)) and isinstance(n.op, (ast.USub, ast.UAdd)):
            return -v if isinstance(n.op, ast.USub) else v
        raise NotStatic

    def _List(self, n: ast.List | ast.Tuple) -> list[object]:
        if any(isinstance(e, ast.Starred) for e in n.elts):
            raise NotStatic
        return [self.eval(e) for e in n.elts]

    _Tuple = _List

    def _Name(self, n: ast.Name) -> object:
        return self._named(n.id)

    def _Attribute(self, n: ast.Attribute) -> object:
        """self.X or OwnClass.X: every value any attribute named X is given in the source."""
        if not self.own(n.value) or ".*" in self.opaque:
            raise NotStatic
        return self._named("." + n.attr)

    def _named(self, key: str) -> object:
        if key in self.opaque or key not in self.values or key in self._busy:
            raise NotStatic
        self._busy.add(key)
        try:
            out: object = None
            for op, expr in self.values[key]:
                v = self.eval(expr)
                if out is None:
                    out = v
                elif isinstance(out, Text) and isinstance(v, Text):
                    out = out + v  # `+=`, or a reassignment: scan every value the name may hold
                elif op == "=" and v == out:
                    continue
                else:
                    raise NotStatic
            return out
        finally:
            self._busy.discard(key)

    def _Call(self, n: ast.Call) -> object:
        if any(isinstance(a, ast.Starred) for a in n.args) or any(k.arg is None for k in n.keywords):
            raise NotStatic
        if isinstance(n.func, ast.Attribute):
            recv = n.func.value
            chains = self.resolve(n.func)
            if chains == {("textwrap", "dedent")} and len(n.args) == 1:
                t = self._text(n.args[0])
                return plain(textwrap.dedent(t.value), t.line_at(0))
            if chains:
                raise NotStatic
            t = self._text(recv)
            if n.func.attr == "join" and len(n.args) == 1:
                items = self.eval(n.args[0])
                if not isinstance(items, list) or not all(isinstance(i, Text) for i in items):
                    raise NotStatic
                out = Text(())
                for i, item in enumerate(items):
                    out = out + (t if i else Text(())) + item  # type: ignore[operator]
                return out
            if n.func.attr == "format" and _safe_format(t.value):
                args = [_to_plain(self.eval(a)) for a in n.args]
                kw = {k.arg: _to_plain(self.eval(k.value)) for k in n.keywords}
                return plain(t.value.format(*args, **kw), t.line_at(0))
            if n.func.attr in _STR_METHODS and not n.keywords:
                args = [_to_plain(self.eval(a)) for a in n.args]
                if all(isinstance(a, str) for a in args):
                    return plain(getattr(t.value, n.func.attr)(*args), t.line_at(0))
        elif (isinstance(n.func, ast.Name) and n.func.id == "str" and len(n.args) == 1 and not n.keywords
              and "str" not in self.values and "str" not in self.opaque):
            v = _to_plain(self.eval(n.args[0]))
            return plain(str(v), n.lineno)
        raise NotStatic

    def _text(self, node: ast.expr) -> Text:
        v = self.eval(node)
        if not isinstance(v, Text):
            raise NotStatic
        return v

    def text(self, node: ast.expr) -> Text:
        """The expression as kernel text: a string, or a list of strings joined by newlines."""
        v = self.eval(node)
        if isinstance(v, Text):
            return v
        if isinstance(v, list) and all(isinstance(i, Text) for i in v):
            out = Text(())
            for i, item in enumerate(v):
                out = out + (plain("\n", item.line_at(0)) if i else Text(())) + item  # type: ignore[operator]
            return out
        if v is None:
            return Text(())
        raise NotStatic
