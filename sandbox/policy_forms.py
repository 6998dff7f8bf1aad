"""Python forms that reach attributes, items or hooks without an attribute expression: match class
patterns, str.format fields, dunder methods the candidate defines, item stores, methods taken through
their class, and classes built from a dict. A mixin of `policy_python.PythonRules` (it needs `add`,
`attribute_name`, `m` and `stack`)."""

from __future__ import annotations

import ast
import string

from kevolve.sandbox.policy_chains import TYPE, TYPE_OF, binds_self, dunder, module_category
from kevolve.sandbox.policy_static import NotStatic, Text
from kevolve.sandbox.policy_tables import DUNDER_DEFS, TORCH_HOOK_DEFS

# Builtins that hand back an object that already exists (a call result is otherwise taken as new: a
# foreign container is reached through attributes, parameters or bindings the policy cannot follow).
_PASSING_CALLS = frozenset(("getattr", "next", "vars", "globals", "locals", "super", "type", "max", "min", "iter"))
_LITERALS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def format_fields(template: str) -> list[str]:
    """Every replacement field's name in a str.format template, nested format specs included."""
    out: list[str] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        return ["<malformed>"]
    for _, field, spec, _ in parsed:
        if field is not None:
            out.append(field)
        if spec:
            out += format_fields(spec)
    return out


def _is_classmethod(f: ast.FunctionDef) -> bool:  # type: ignore[valid-type]
    return any(isinstance(d, ast.Name) and d.id == "classmethod" for d in f.decorator_list)


class FormRules:
    """Rules for the forms above; each is called from the matching PythonRules visitor."""

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        """`case object(__traceback__=tb)` reads attribute __traceback__ of the subject."""
        for attr in node.kwd_attrs:
            self.attribute_name(node, attr, False)  # type: ignore[attr-defined]
        self.generic_visit(node)  # type: ignore[attr-defined]

    def defined_dunder(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A dunder method outside DUNDER_DEFS is a hook numpy, torch or the interpreter calls
        (__array_interface__ hands numpy any address, __torch_function__ sees every op …)."""
        if dunder(node.name) and node.name not in DUNDER_DEFS:
            category = "monkeypatch" if node.name in TORCH_HOOK_DEFS else "introspection"
            self.add(category, node, f"defines {node.name} (a hook outside the allowed dunder "  # type: ignore[attr-defined]
                                            "methods)")

    def format_read(self, recv: ast.expr, attr: str, node: ast.AST) -> None:
        """str.format/format_map walk attributes and items named in the template ("{0.__globals__}"),
        called or taken as a value: the template must be a static string whose fields are plain names
        or positions."""
        if attr not in ("format", "format_map") or self.m.resolve(recv):  # type: ignore[attr-defined]
            return  # not a format, or a module's own format function (the chain rules judge it)
        try:
            template = self.m.static.eval(recv)  # type: ignore[attr-defined]
        except (NotStatic, RecursionError):
            template = None
        if attr == "format_map" or not isinstance(template, Text):
            self.add("introspection", node, f".{attr} on a template the policy cannot read (its fields "  # type: ignore[attr-defined]
                                            "may walk attributes)")
            return
        walks = [fd for fd in format_fields(template.value) if any(c in fd for c in ".[") or fd == "<malformed>"]
        if walks:
            self.add("introspection", node, f"format field {{{walks[0][:40]}}} reads attributes or items")  # type: ignore[attr-defined]

    def with_across_yield(self, node: ast.With | ast.AsyncWith) -> None:
        """A torch/numpy/CuPy/Triton context manager around a `yield`: the suspended generator keeps
        the setting on (sdpa_kernel, errstate …) for everything that runs meanwhile."""
        managers = [c for item in node.items for c in self.m.resolve(  # type: ignore[attr-defined]
            item.context_expr.func if isinstance(item.context_expr, ast.Call) else item.context_expr)]
        if not any(c[0] in ("torch", "numpy", "cupy", "triton") for c in managers):
            return
        todo: list[ast.AST] = list(node.body)
        while todo:
            n = todo.pop()
            if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)):
                self.add("process_setting", node, "yields inside a with block (the context manager stays "  # type: ignore[attr-defined]
                                                  "entered while the generator is suspended)")
                return
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                todo += list(ast.iter_child_nodes(n))

    def class_from_dict(self, node: ast.Call) -> None:
        """type(name, bases, namespace) defines a class whose namespace may hold any dunder."""
        if TYPE in self.m.resolve(node.func) and len(node.args) + len(node.keywords) >= 3:  # type: ignore[attr-defined]
            self.add("introspection", node, "builds a class with type(name, bases, namespace)")  # type: ignore[attr-defined]

    def method_through_class(self, node: ast.Attribute) -> None:
        """`Own.method(obj, …)` runs a method with any object as its self, so the method's `self.x = …`
        and getattr(self, name) would reach that object: only `Own.method(self, …)` is allowed."""
        recv, m = node.value, self.m  # type: ignore[attr-defined]
        own_class = isinstance(recv, ast.Name) and isinstance(m.own.get(recv.id), ast.ClassDef) \
            or isinstance(recv, ast.Call) and TYPE_OF in m.resolve(recv) \
            or isinstance(recv, ast.Name) and m.param_kind(recv.id, self.stack) == "first" and recv.id != "self"  # type: ignore[attr-defined]
        if not own_class or node.attr not in self._self_methods():
            return
        parent = m.parents.get(node)
        if isinstance(parent, ast.Call) and parent.func is node and parent.args \
                and m.is_own_self(parent.args[0], self.stack):  # type: ignore[attr-defined]
            return
        self.add("monkeypatch", node, f"takes the method {node.attr} through its class (any object could be "  # type: ignore[attr-defined]
                                      "passed as its self)")

    def _self_methods(self) -> set[str]:
        """Names of the candidate's methods whose first parameter is bound to the instance."""
        if not hasattr(self, "_methods"):
            self._methods = {f.name for c in self.m.scopes if isinstance(c, ast.ClassDef)  # type: ignore[attr-defined]
                             for f in c.body if binds_self(f, c, self.m.resolve)  # type: ignore[attr-defined]
                             and not _is_classmethod(f)}
        return self._methods

    def item_store(self, node: ast.Subscript) -> None:
        """Items may be stored only into what the candidate made (like attributes): its own self, its
        literals and containers, tensors it allocated. Not into parameters, call results or other
        locals, which may hold a module's dict or another object the candidate did not create."""
        root = node.value
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(root, _LITERALS) or isinstance(root, ast.Name) and self._made_container(root.id):
            return
        self.add("monkeypatch", node, f"assigns an item of {ast.unparse(node.value)[:40]}, which may be an "  # type: ignore[attr-defined]
                                      "object the candidate did not create")

    def _made_container(self, name: str) -> bool:
        m = self.m  # type: ignore[attr-defined]
        kind = m.param_kind(name, self.stack)  # type: ignore[attr-defined]
        if kind == "first" or m.made_here(name) or m.own_receiver(ast.Name(id=name)) and name != "self":
            return True
        if kind == "param":  # forward's inputs are the harness's tensors; a helper's may be anything
            return self._in_compiled_kernel(name)
        values = m.values.get(name, [])
        return bool(values) and len(values) >= m.bindings.get(name, 0) and all(self._fresh(v) for _, v in values)

    def _in_compiled_kernel(self, param: str) -> bool:
        """The innermost function binding `param` is a kernel a DSL compiles rather than Python runs
        (@triton.jit, @cupy.fuse, or a compiler off the allowlist, rejected as an import anyway):
        its `out[i] = v` is a store into device memory, not into a Python object."""
        fn = next((f for f in reversed(self.stack) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and param in self.m.scopes[f].params), None)  # type: ignore[attr-defined]
        for d in getattr(fn, "decorator_list", ()):
            for c in self.m.resolve(d.func if isinstance(d, ast.Call) else d):  # type: ignore[attr-defined]
                if c[0] == "triton" or c[:2] == ("cupy", "fuse") or module_category(c[0]) is not None:
                    return True
        return False

    @staticmethod
    def _fresh(value: ast.expr) -> bool:
        """A literal, an arithmetic result, or what a call returned (a new tensor or container, or a
        tensor method's receiver: a store into an input is an in-place mutation, which the evaluator
        catches at run time as mutated_inputs) — not getattr(), next() and other pass-throughs."""
        if isinstance(value, (*_LITERALS, ast.Constant, ast.Tuple, ast.BinOp)):
            return True
        f = value.func if isinstance(value, ast.Call) else None
        return f is not None and not (isinstance(f, ast.Name) and f.id in _PASSING_CALLS) \
            and not (isinstance(f, ast.Attribute) and dunder(f.attr))
