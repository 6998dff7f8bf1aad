"""Python forms that reach attributes, items or hooks without an attribute expression: match class
patterns, str.format fields, dunder methods the candidate defines, item stores, methods taken through
their class, and classes built from a dict. A mixin of `policy_python.PythonRules` (it needs `add`,
`attribute_name`, `m` and `stack`)."""

from __future__ import annotations

import ast
import string

from kevolve.sandbox.policy.chains import TYPE, TYPE_OF, binds_self, dunder, module_category
from kevolve.sandbox.policy.static import NotStatic, Text
from kevolve.languages import LANGUAGES
from kevolve.sandbox.policy.tables import DUNDER_DEFS, HEAVY, TORCH_HOOK_DEFS

# decorators whose function a kernel language compiles (@triton.jit, @cupy.fuse: kevolve/languages.py)
JIT_DECORATORS = tuple(d for lang in LANGUAGES.values() for d in lang.jit_decorators)

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


def _choices(e: ast.expr) -> list[ast.expr]:
    """The values an expression may take through conditional choices: `A if c else B` -> A, B; `a or b` -> a, b."""
    if isinstance(e, ast.IfExp):
        return [*_choices(e.body), *_choices(e.orelse)]
    if isinstance(e, ast.BoolOp):
        return [c for v in e.values for c in _choices(v)]
    return [e]


def _test_call(call: ast.Call) -> bool:
    """isinstance(x, A), issubclass(A, B), super(A, self): a class named, not handed on."""
    return isinstance(call.func, ast.Name) and call.func.id in ("isinstance", "issubclass", "super")


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
        if not any(c[0] in HEAVY for c in managers):
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
        and getattr(self, name) would reach that object: only `Own.method(self, …)` is allowed. `Own`
        is any name that may hold one of the candidate's classes (`holds_class`: an alias, a parameter
        handed one) and `Outer.Inner`."""
        recv, m = node.value, self.m  # type: ignore[attr-defined]
        own_class = isinstance(recv, ast.Name) and self.holds_class(recv.id) \
            or isinstance(recv, ast.Attribute) and isinstance(m.own.get(recv.attr), ast.ClassDef) \
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

    def class_value(self, node: ast.Name) -> None:
        """One of the candidate's classes (or a name holding one) used as a value. It may be called,
        have an attribute read (method_through_class judges a method taken), be tested against,
        subclassed, aliased by a plain assignment, or handed to a parameter of the candidate's own
        functions: each alias and parameter is then followed like the class (`holds_class`). Anywhere
        else (a container, getattr, a foreign call, a default, a return) the policy would lose track of
        it, and `K.put(obj, v)` would run the method with any object as its self."""
        if not self.holds_class(node.id):
            return
        m = self.m  # type: ignore[attr-defined]
        at, p = node, m.parents.get(node)
        while isinstance(p, (ast.IfExp, ast.BoolOp)) and at is not getattr(p, "test", None):
            at, p = p, m.parents.get(p)  # a choice between values goes where the choice goes (`A if c else None`)
        if isinstance(p, ast.keyword) and isinstance(m.parents.get(p), ast.Call):  # f(k=A): k followed like A
            ok = self._class_arg(m.parents[p], p) is not None
        elif isinstance(p, ast.Tuple):  # isinstance(x, (A, B)), except (A, B):
            p = m.parents.get(p)
            ok = isinstance(p, ast.ExceptHandler) or isinstance(p, ast.Call) and _test_call(p)
        elif isinstance(p, ast.Call):
            ok = p.func is at or _test_call(p) or self._class_arg(p, at) is not None \
                or at is node and self._static_attr_of_class(p, node)
        elif isinstance(p, ast.Assign):
            ok = p.value is at and len(p.targets) == 1 and isinstance(p.targets[0], ast.Name) \
                and m.scopes[self.stack[-1]].kind != "class"  # type: ignore[attr-defined]
        elif isinstance(p, ast.ClassDef):
            ok = at is node and node in p.bases
        else:
            ok = at is node and isinstance(p, (ast.Attribute, ast.ExceptHandler, ast.Compare, ast.MatchClass))
        if not ok:
            self.add("monkeypatch", node, f"hands its class {node.id} on as a value (the policy would lose "  # type: ignore[attr-defined]
                                          "track of it: its methods could run with any object as self)")

    def _static_attr_of_class(self, call: ast.Call, node: ast.Name) -> bool:
        """hasattr/getattr/setattr(Own, "name", …) with a static name: Own.name, judged like it (a
        method taken this way is the method taken through its class)."""
        f = call.func
        if not (isinstance(f, ast.Name) and f.id in ("hasattr", "getattr", "setattr") and len(call.args) >= 2
                and call.args[0] is node and not call.keywords):
            return False
        try:
            name = self.m.static.eval(call.args[1])  # type: ignore[attr-defined]
        except (NotStatic, RecursionError):
            return False
        return isinstance(name, Text) and (f.id == "hasattr" or name.value not in self._self_methods())

    def holds_class(self, name: str, stack: list[ast.AST] | None = None) -> bool:
        """`name`, where `stack` (the visitor's scopes) reads it, may hold one of the candidate's classes."""
        return (self._binder(name, self.stack if stack is None else stack), name) in self._class_holders()  # type: ignore[attr-defined]

    def _binder(self, name: str, stack: list[ast.AST]) -> ast.AST | None:
        """The innermost function scope in `stack` that binds `name`; None for a module-level name."""
        for node in reversed(stack):
            s = self.m.scopes.get(node)  # type: ignore[attr-defined]
            if s is not None and s.kind == "function" and name in (s.params | s.assigned) \
                    and name not in s.declared_global:
                return node
        return None

    def _class_holders(self) -> set[tuple[ast.AST | None, str]]:
        """(binding function or None, name) of every name that may hold one of the candidate's classes:
        the classes themselves, plain aliases of them, and parameters of its own functions and methods
        that a call hands one (to a fixed point)."""
        if hasattr(self, "_holders"):
            return self._holders
        m = self.m  # type: ignore[attr-defined]
        sites: list[tuple[ast.AST, list[ast.AST]]] = []  # every node with its function scopes

        def walk(n: ast.AST, stack: list[ast.AST]) -> None:
            for c in ast.iter_child_nodes(n):
                sites.append((c, stack))
                inner = stack + [c] if c in m.scopes else stack
                walk(c, inner)

        tree = next(n for n, sc in m.scopes.items() if sc.kind == "module")
        walk(tree, [tree])
        held: set[tuple[ast.AST | None, str]] = {(self._binder(n.name, st), n.name) for n, st in sites
                                                 if isinstance(n, ast.ClassDef)}
        self._holders = held
        for _ in range(8):
            before = len(held)
            for n, st in sites:
                holds = lambda e, st=st: any(isinstance(c, ast.Name) and (self._binder(c.id, st), c.id) in held
                                             for c in _choices(e))
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                        and holds(n.value):
                    held.add((self._binder(n.targets[0].id, st), n.targets[0].id))
                elif isinstance(n, ast.Call):
                    for a in [*n.args, *n.keywords]:
                        if holds(a.value if isinstance(a, ast.keyword) else a):
                            got = self._class_arg(n, a, st)
                            if got is not None:
                                held.add(got)
            if len(held) == before:
                break
        return held

    def _class_arg(self, call: ast.Call, arg: ast.AST, stack: list[ast.AST] | None = None) -> tuple[ast.AST, str] | None:
        """(function, parameter) that `arg` of `call` binds when the callee is one of the candidate's
        own functions, a method of the class being defined called on self or cls, or an own class's
        __init__; None otherwise (or for *args/**kwargs, which the policy does not follow)."""
        m = self.m  # type: ignore[attr-defined]
        stack = self.stack if stack is None else stack  # type: ignore[attr-defined]
        f, fn, skip = call.func, None, 0
        if isinstance(f, ast.Name) and m.bindings.get(f.id) == 1:
            fn = m.own.get(f.id)
            if isinstance(fn, ast.ClassDef):
                fn = next((b for b in fn.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)
                skip = 1
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls"):
            cls = next((c for c in reversed(stack) if isinstance(c, ast.ClassDef)), None)
            fn = next((b for b in getattr(cls, "body", ()) if isinstance(b, ast.FunctionDef) and b.name == f.attr
                       and not b.decorator_list), None)
            skip = 1
        if not isinstance(fn, ast.FunctionDef) or fn.decorator_list and skip == 0:
            return None
        params = [p.arg for p in fn.args.posonlyargs + fn.args.args][skip:]
        if isinstance(arg, ast.keyword):
            names = params + [p.arg for p in fn.args.kwonlyargs]
            return (fn, arg.arg) if arg.arg in names else None
        i = call.args.index(arg)  # type: ignore[arg-type]
        return (fn, params[i]) if i < len(params) and not any(isinstance(a, ast.Starred) for a in call.args[:i + 1]) \
            else None

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
        values = [*m.values.get(name, []), *(("op=", v) for v in m.augmented.get(name, ()))]
        return bool(values) and len(values) >= m.bindings.get(name, 0) and all(self._fresh(v) for _, v in values)

    def _in_compiled_kernel(self, param: str) -> bool:
        """The innermost function binding `param` is a kernel a DSL compiles rather than Python runs
        (@triton.jit, @cupy.fuse, or a compiler off the allowlist, rejected as an import anyway):
        its `out[i] = v` is a store into device memory, not into a Python object."""
        fn = next((f for f in reversed(self.stack) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and param in self.m.scopes[f].params), None)  # type: ignore[attr-defined]
        for d in getattr(fn, "decorator_list", ()):
            for c in self.m.resolve(d.func if isinstance(d, ast.Call) else d):  # type: ignore[attr-defined]
                if any(c[:len(d)] == d for d in JIT_DECORATORS) or module_category(c[0]) is not None:
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
