"""The Python rules of the candidate policy: one pass over the candidate's syntax tree.

Every finding is `(category, line, what)`. The visitor resolves names through imports and plain
aliases (policy_scope), classifies the dotted names it meets (policy_chains), and enforces the
structural rules no table can: dunder access, dynamic getattr/setattr, assignments to what the
candidate did not create, modules and foreign classes passed around as values, the environment,
and the kernel sources handed to compilers (policy_native).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from kevolve.sandbox.policy.chains import TYPE_OF, classify, dotted, dunder, is_class, module_category, store_category
from kevolve.sandbox.policy.forms import FormRules
from kevolve.sandbox.policy.native import NATIVE_ENTRIES, check_native_call
from kevolve.sandbox.policy.positions import position_ok, protected_value
from kevolve.sandbox.policy.scope import Chain, Model
from kevolve.sandbox.policy.static import NotStatic, Text
from kevolve.contract import parse_python
from kevolve.sandbox.policy.tables import (ATTR_BUILTINS, BUILTINS, CONTEXT_DUNDERS, DUNDER_NAMES, DUNDER_READ,
                                           FILE_METHODS, FRAME_ATTRS, HEAVY, MUTATORS, REGISTER_METHODS, SECRET_ENV,
                                           SECRET_ENV_PREFIXES, THREAD_METHODS)

Finding = tuple[str, int, str]
_SECRET = re.compile(SECRET_ENV, re.I)
_BUILTIN_CLASSES = frozenset(("object", "type", "int", "float", "str", "bytes", "list", "dict", "set", "tuple",
                              "frozenset", "bool", "complex", "BaseException", "Exception", "property", "super"))


def _secret(var: str) -> bool:
    return bool(_SECRET.search(var)) or var.upper().startswith(SECRET_ENV_PREFIXES)


class PythonRules(FormRules, ast.NodeVisitor):
    """Walk the tree once and collect every finding (the caller picks which to report)."""

    def __init__(self, model: Model) -> None:
        self.m = model
        self.found: list[Finding] = []
        self.stack: list[ast.AST] = []
        self.in_annotation = 0

    def add(self, category: str, node: ast.AST, what: str) -> None:
        """Record a finding at the node's line."""
        self.found.append((category, getattr(node, "lineno", 0), what))

    # ----- scopes and annotations -------------------------------------------------------------
    def _scoped(self, node: ast.AST, body: list[ast.AST]) -> None:
        self.stack.append(node)
        for child in body:
            self.visit(child)
        self.stack.pop()

    def visit_Module(self, node: ast.Module) -> None:
        self._scoped(node, node.body)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.defined_dunder(node)
        for d in node.decorator_list:
            self.visit(d)
        self._arguments(node.args)
        if node.returns is not None:
            self.annotation(node.returns)
        self._scoped(node, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._arguments(node.args)
        self._scoped(node, [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for e in (*node.decorator_list, *node.bases, *[k.value for k in node.keywords]):
            self.visit(e)
        self._scoped(node, node.body)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        self.visit(node.generators[0].iter)  # evaluated in the enclosing scope
        rest: list[ast.AST] = [node.generators[0].target, *node.generators[0].ifs]
        for g in node.generators[1:]:
            rest += [g.iter, g.target, *g.ifs]
        elts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        self._scoped(node, [*rest, *elts])

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def _arguments(self, args: ast.arguments) -> None:
        for d in (*args.defaults, *[d for d in args.kw_defaults if d is not None]):
            self.visit(d)
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if a is not None and a.annotation is not None:
                self.annotation(a.annotation)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.target)
        self.annotation(node.annotation)
        if node.value is not None:
            self.visit(node.value)

    def annotation(self, node: ast.expr) -> None:
        """Annotations are code: string ones are evaluated by typing and TorchScript, so parse them."""
        self.in_annotation += 1
        self.visit(node)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                self.code_in_string(sub.value, sub.lineno, "eval")
        self.in_annotation -= 1

    def code_in_string(self, text: str, line: int, mode: str) -> None:
        """Check a string that something will evaluate as Python (annotation, type comment) as code."""
        try:
            tree = parse_python(text.strip(), mode=mode)
        except (SyntaxError, ValueError):
            return  # not code: nothing would evaluate it either
        ast.increment_lineno(tree, line - 1)
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.m.parents[child] = parent
        self.in_annotation += 1
        self.visit(tree)
        self.in_annotation -= 1

    # ----- imports ----------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            verdict = module_category(a.name)
            if verdict is not None:
                self.add(verdict[0], node, verdict[1])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            self.add("import", node, "relative import")
            return
        verdict = module_category(node.module)
        if verdict is not None:
            self.add(verdict[0], node, verdict[1])
            return
        for a in node.names:
            if a.name == "*":
                self.add("import", node, f"from {node.module} import * (hides which names are used)")
                continue
            chain = (*node.module.split("."), a.name)
            verdict = module_category(dotted(chain)) if self.m.is_module(chain) else classify(chain, "load")
            if verdict is not None:
                self.add(verdict[0], node, verdict[1])
            elif dunder(a.name) or a.name in FRAME_ATTRS:
                self.add("introspection", node, f"imports {dotted(chain)}")

    # ----- names and attributes -----------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        parent = self.m.parents.get(node)
        if dunder(node.id) and node.id not in DUNDER_NAMES:
            if isinstance(node.ctx, ast.Load):
                self.add("introspection", node, f"uses {node.id}")
            else:
                self.add("monkeypatch", node, f"rebinds {node.id}")
        if isinstance(node.ctx, ast.Load) and self.m.possibly_builtin(node.id, self.stack):
            if node.id in BUILTINS:
                self.add(BUILTINS[node.id], node, f"uses {node.id}")
            elif node.id in ATTR_BUILTINS and not (isinstance(parent, ast.Call) and parent.func is node):
                self.add("introspection", node, f"passes {node.id} around")
        if isinstance(node.ctx, ast.Load) and not (isinstance(parent, ast.Attribute) and parent.value is node):
            self.chains(node, self.m.resolve(node))
        if isinstance(node.ctx, ast.Load):
            self.class_value(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        store = not isinstance(node.ctx, ast.Load)
        self.attribute_name(node, node.attr, store)
        parent = self.m.parents.get(node)
        if not (isinstance(parent, ast.Attribute) and parent.value is node):
            chains = self.m.resolve(node)
            if store:
                for c in chains:
                    self.add(*self._at(node, store_category(c)))
                if not chains:
                    self.foreign_receiver(node.value, node, dotted_attr=node.attr)
            else:
                self.chains(node, chains)
        if not store:
            self.method_through_class(node)
            self.format_read(node.value, node.attr, node)
        self.generic_visit(node)

    def _at(self, node: ast.AST, verdict: tuple[str, str]) -> tuple[str, ast.AST, str]:
        return verdict[0], node, verdict[1]

    def attribute_name(self, node: ast.AST, attr: str, store: bool) -> None:
        """Rules about an attribute name on any receiver: dunders, frame attributes, file/thread methods."""
        if attr in CONTEXT_DUNDERS and not store:
            self.add("process_setting", node, f"calls .{attr} by hand (a context manager left open changes "
                                              "state for the whole process)")
        elif dunder(attr):
            if store:
                self.add("monkeypatch", node, f"assigns .{attr}")
            elif attr not in DUNDER_READ:
                self.add("introspection", node, f"reads .{attr}")
        elif attr in FRAME_ATTRS:
            self.add("introspection", node, f"reads .{attr}")
        elif attr in FILE_METHODS:
            self.add("files", node, f"calls .{attr}")
        elif attr in THREAD_METHODS:
            self.add("threads", node, f"calls .{attr} (Python run on a driver thread)")
        elif attr in REGISTER_METHODS:
            self.add("monkeypatch", node, f"calls .{attr} (registers an operator implementation process-wide)")

    def chains(self, node: ast.expr, chains: set[Chain]) -> None:
        """A maximal dotted name that is read or called: classify it, and check where it goes."""
        parent = self.m.parents.get(node)
        ctx = "call" if isinstance(parent, ast.Call) and parent.func is node else "load"
        for c in chains:
            verdict = classify(c, ctx)
            if verdict is not None:
                self.add(verdict[0], node, verdict[1])
            if ctx == "call" and self._mutates_module_data(c):
                self.add("monkeypatch", node, f"mutates {dotted(c[:-1])}")
            if dotted(c) in NATIVE_ENTRIES and ctx != "call":
                self.add("native", node, f"kernel source not statically known ({dotted(c)} passed around)")
        if self.in_annotation:
            return
        protected = [c for c in chains if protected_value(self.m, c)]
        if protected and not position_ok(self.m, self.stack, node, all(not self.m.is_module(c) for c in protected)):
            c = protected[0]
            if c[:2] == ("os", "environ"):
                self.add("environment", node, "reads the whole environment (os.environ)")
            else:
                self.add("introspection", node, f"passes {dotted(c)} around as a value (the policy follows "
                                                "modules and foreign classes only through imports and aliases)")

    def _mutates_module_data(self, c: Chain) -> bool:
        recv = c[:-1]
        return (c[-1] in MUTATORS and len(c) >= 3 and not self.m.is_module(recv) and not is_class(recv)
                and recv[:2] != ("torch", "ops"))

    def foreign_receiver(self, recv: ast.expr, node: ast.AST, dotted_attr: str) -> None:
        """Attributes may be stored only on what the candidate made: a method's self/cls/ctx, its own
        classes, new instances of them, and loop variables over what hangs off self. Not on parameters
        (forward's inputs are the harness's tensors), builtins, call results or other locals, which
        may hold an object or class the candidate did not create."""
        root = recv
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(root, ast.Call):
            if not self.m.own_instance(root):
                self.add("monkeypatch", node, f"assigns .{dotted_attr} on an object a call returned")
        elif not isinstance(root, ast.Name):
            self.add("monkeypatch", node, f"assigns .{dotted_attr} on an object the candidate did not create")
        elif self.m.param_kind(root.id, self.stack) == "first" or self.m.own_receiver(root) \
                and root.id != "self" or self.m.made_here(root.id):
            return
        elif root.id in _BUILTIN_CLASSES and self.m.possibly_builtin(root.id, self.stack):
            self.add("monkeypatch", node, f"assigns {root.id}.{dotted_attr}")
        else:
            self.add("monkeypatch", node, f"assigns .{dotted_attr} on {root.id}, which may be an object the "
                                          "candidate did not create")

    # ----- calls --------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Name) and f.id in ATTR_BUILTINS and self.m.possibly_builtin(f.id, self.stack):
            self.attr_builtin(node, f.id)
        for c in self.m.resolve(f):
            name = dotted(c)
            if name in NATIVE_ENTRIES:
                self.found += check_native_call(node, name, self.m)
            elif c in (("os", "getenv"), ("os", "environ", "get")):
                self.env_key(node, node.args[0] if node.args else None, "reads")
        if TYPE_OF in self.m.resolve(node) and not self.in_annotation \
                and not position_ok(self.m, self.stack, node, True):
            self.add("introspection", node, "passes type(…) around as a value")
        writes_onto_arg = self.m.resolve(f) & {("functools", "update_wrapper")} or isinstance(f, ast.Call) \
            and self.m.resolve(f.func) & {("functools", "wraps")}  # update_wrapper(target, …), wraps(w)(target)
        if writes_onto_arg and node.args and self.m.resolve(node.args[0]):
            self.add("monkeypatch", node, f"relabels {dotted(sorted(self.m.resolve(node.args[0]))[0])} (functools "
                                          "wrapper attributes written onto it)")
        self.class_from_dict(node)
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) and (f.attr in ("use", "enable", "disable")
                                                                          or f.attr.startswith(("set_", "enable_"))):
            made = {c for c in self.m.resolve(f.value.func) if c[0] in HEAVY}
            if made:
                self.add("process_setting", node, f"{dotted(sorted(made)[0])}(…).{f.attr}() changes process-wide "
                                                  "state")
        self.generic_visit(node)

    def attr_builtin(self, node: ast.Call, fn: str) -> None:
        """getattr/setattr/delattr/hasattr: with names known statically (a literal, or each value of
        a loop over literals) they are attribute accesses like any other; else introspection."""
        if len(node.args) < 2 or node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            self.add("introspection", node, f"{fn} with arguments the policy cannot read")
            return
        try:
            name = self.m.static.eval(node.args[1])
        except (NotStatic, RecursionError):
            name = None
        names = [name.value] if isinstance(name, Text) else self.m.choices(node.args[1])
        if names is None:
            if not self.m.is_own_self(node.args[0], self.stack):
                self.add("introspection", node, f"{fn} with a name computed at run time")
            return
        store = fn in ("setattr", "delattr")
        for attr in names:
            self.attribute_name(node, attr, store)
            self.format_read(node.args[0], attr, node)
            chains = {(*c, attr) for c in self.m.resolve(node.args[0])}
            if store:
                for c in chains:
                    self.add(*self._at(node, store_category(c)))
                if not chains and not self.m.is_own_self(node.args[0], self.stack):
                    self.foreign_receiver(node.args[0], node, dotted_attr=attr)
            elif fn == "getattr" and isinstance(name, Text):
                self.chains(node, chains)
            else:
                for c in chains:
                    verdict = classify(c, "load")
                    if verdict is not None:
                        self.add(verdict[0], node, verdict[1])

    # ----- the environment and item stores ---------------------------------------------------------
    def env_key(self, node: ast.AST, key: ast.expr | None, verb: str) -> None:
        """One environment variable read: its name must be static and not look like a credential."""
        try:
            value = self.m.static.eval(key) if key is not None else None
        except (NotStatic, RecursionError):
            value = None
        if not isinstance(value, Text):
            self.add("environment", node, f"{verb} an environment variable named at run time")
        elif _secret(value.value):
            self.add("environment", node, f"{verb} the environment variable {value.value}")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        chains = self.m.resolve(node.value)
        if ("os", "environ") in chains:
            if isinstance(node.ctx, ast.Load):
                self.env_key(node, node.slice, "reads")
            else:
                self.add("environment", node, "sets or deletes an environment variable")
        elif chains and not isinstance(node.ctx, ast.Load):
            self.add("monkeypatch", node, f"assigns an item of {dotted(sorted(chains)[0])}")
        elif not isinstance(node.ctx, ast.Load):
            self.item_store(node)
        self.generic_visit(node)

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        self.with_across_yield(node)
        self.generic_visit(node)

    visit_AsyncWith = visit_With

    def visit_Compare(self, node: ast.Compare) -> None:
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)) and ("os", "environ") in self.m.resolve(right):
                self.env_key(node, node.left, "tests")
        self.generic_visit(node)


def type_comments(source: str) -> list[tuple[str, int, str]]:
    """`# type:` comments (TorchScript evaluates them as annotations): (text, line, parse mode)."""
    out: list[tuple[str, int, str]] = []
    if not re.search(r"#\s*type\s*:", source):
        return out
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return out
    for tok in tokens:
        m = re.match(r"#\s*type\s*:(.*)", tok.string) if tok.type == tokenize.COMMENT else None
        if m and not m.group(1).strip().startswith("ignore"):
            text = m.group(1).strip()
            out.append((text, tok.start[0], "func_type" if "->" in text else "eval"))
    return out


def python_findings(tree: ast.Module, source: str) -> list[Finding]:
    """Every Python-level finding in a parsed candidate."""
    model = Model(tree)
    rules = PythonRules(model)
    rules.visit(tree)
    for text, line, mode in type_comments(source):
        rules.stack = [tree]
        rules.code_in_string(text, line, mode)
    return rules.found
