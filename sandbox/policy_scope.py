"""Who is who in a candidate, statically: import bindings, aliases, scopes and simple assignments.

Names are followed without regard to scope where that errs on the side of caution (a name that any
import or alias binds is taken to be that module everywhere), and with Python's scoping rules where
caution needs them (a builtin such as `open` is only "the builtin" where no function scope binds it).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field

from kevolve.sandbox.policy_static import NotStatic, StaticEval
from kevolve.sandbox.policy_tables import KNOWN_MODULES

Chain = tuple[str, ...]
_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                    ast.GeneratorExp)
SCOPES = (ast.Module, ast.ClassDef, *_FUNCTION_SCOPES)


@dataclass
class Scope:
    """Names one scope binds: its parameters, everything else, and its `global` declarations."""

    kind: str  # "module", "class" or "function" (functions, lambdas, comprehensions)
    params: set[str] = field(default_factory=set)
    assigned: set[str] = field(default_factory=set)
    declared_global: set[str] = field(default_factory=set)
    first_param: str | None = None


class Model:
    """The candidate's names: what each may refer to, and where each is bound."""

    def __init__(self, tree: ast.Module) -> None:
        self.parents: dict[ast.AST, ast.AST] = {}
        self.names: dict[str, set[Chain]] = defaultdict(set)  # import and alias bindings
        self.imported: set[str] = set()  # dotted names of modules imported (and their parents)
        self.values: dict[str, list[tuple[str, ast.expr]]] = defaultdict(list)
        self.opaque: set[str] = set()  # names also bound by parameters, loops, imports, defs …
        self.own: set[str] = set()  # classes and functions the candidate defines
        self.scopes: dict[ast.AST, Scope] = {}
        self._aliases: list[tuple[str, ast.expr]] = []
        self._collect(tree, [])
        self.static = StaticEval(self.values, self.opaque, self.resolve)
        self._resolve_aliases()

    # ----- collection -------------------------------------------------------------------------
    def _collect(self, node: ast.AST, stack: list[ast.AST]) -> None:
        if isinstance(node, SCOPES):
            kind = "module" if isinstance(node, ast.Module) else "class" if isinstance(node, ast.ClassDef) \
                else "function"
            self.scopes[node] = Scope(kind)
            stack = [*stack, node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                self._params(node.args, self.scopes[node])
        scope = self.scopes[stack[-1]] if stack else None
        self._bind(node, stack, scope)
        for child in ast.iter_child_nodes(node):
            self.parents[child] = node
            inner = stack
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)) and \
                    child in (*getattr(node, "decorator_list", ()), *getattr(node, "bases", ()),
                              *[k.value for k in getattr(node, "keywords", ())], getattr(node, "returns", None)):
                inner = stack[:-1]  # decorators, bases and return annotations run in the enclosing scope
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and child is node.args:
                self._collect_args(node.args, stack[:-1])
                continue
            self._collect(child, inner)

    def _collect_args(self, args: ast.arguments, stack: list[ast.AST]) -> None:
        # defaults and annotations are evaluated in the enclosing scope
        self.parents[args] = self.parents.get(args, args)
        for child in ast.iter_child_nodes(args):
            self.parents[child] = args
            if isinstance(child, ast.arg):
                for sub in ast.iter_child_nodes(child):
                    self.parents[sub] = child
                    self._collect(sub, stack)
            else:
                self._collect(child, stack)

    @staticmethod
    def _params(args: ast.arguments, scope: Scope) -> None:
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        scope.params = {a.arg for a in every if a is not None}
        positional = [*args.posonlyargs, *args.args]
        scope.first_param = positional[0].arg if positional else None

    def _bind(self, node: ast.AST, stack: list[ast.AST], scope: Scope | None) -> None:
        if scope is None:
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            outer = self.scopes[stack[-2]]
            outer.assigned.add(node.name)
            self.own.add(node.name)
            self.opaque.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(node, scope)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            scope.declared_global.update(node.names if isinstance(node, ast.Global) else ())
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            target_scope = scope
            if isinstance(self.parents.get(node), ast.NamedExpr):
                target_scope = next(self.scopes[s] for s in reversed(stack)
                                    if not isinstance(s, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)))
            target_scope.assigned.add(node.id)
            self._value_of(node, scope)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.assigned.add(node.name)
            self.opaque.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            scope.assigned.add(node.name)
            self.opaque.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            scope.assigned.add(node.rest)
            self.opaque.add(node.rest)
        elif isinstance(node, ast.arg):
            self.opaque.add(node.arg)

    def _value_of(self, name: ast.Name, scope: Scope) -> None:
        """Record a simple assignment's value (for static evaluation and aliases); else opaque."""
        parent = self.parents.get(name)
        if isinstance(parent, ast.Assign) and name in parent.targets:
            self.values[name.id].append(("=", parent.value))
            if scope.kind != "class":
                self._aliases.append((name.id, parent.value))
            return
        if isinstance(parent, ast.AnnAssign) and parent.value is not None:
            self.values[name.id].append(("=", parent.value))
            return
        if isinstance(parent, ast.AugAssign) and isinstance(parent.op, ast.Add):
            self.values[name.id].append(("+=", parent.value))
            return
        if isinstance(parent, ast.NamedExpr):
            self.values[name.id].append(("=", parent.value))
            self._aliases.append((name.id, parent.value))
            return
        if isinstance(parent, ast.Tuple) and isinstance(self.parents.get(parent), ast.Assign):
            assign = self.parents[parent]
            if isinstance(assign.value, ast.Tuple) and len(assign.value.elts) == len(parent.elts):
                self.values[name.id].append(("=", assign.value.elts[parent.elts.index(name)]))
                return
        self.opaque.add(name.id)

    def _import(self, node: ast.Import | ast.ImportFrom, scope: Scope) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = tuple(a.name.split("."))
                self.imported.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
                bound = a.asname or parts[0]
                self.names[bound].add(parts if a.asname else parts[:1])
                scope.assigned.add(bound)
                self.opaque.add(bound)
            return
        if node.level or not node.module:
            return
        base = tuple(node.module.split("."))
        self.imported.update(".".join(base[:i]) for i in range(1, len(base) + 1))
        for a in node.names:
            if a.name == "*":
                continue
            bound = a.asname or a.name
            self.names[bound].add((*base, a.name))
            scope.assigned.add(bound)
            self.opaque.add(bound)

    def _resolve_aliases(self) -> None:
        for _ in range(8):  # aliases of aliases, to a fixpoint
            changed = False
            for target, value in self._aliases:
                new = self.resolve(value) - self.names[target]
                if new:
                    self.names[target] |= new
                    changed = True
            if not changed:
                return

    # ----- queries ----------------------------------------------------------------------------
    def resolve(self, node: ast.expr) -> set[Chain]:
        """Every dotted name an expression may stand for (empty when it is not import-rooted)."""
        if isinstance(node, ast.Name):
            return set(self.names.get(node.id, ()))
        if isinstance(node, ast.Attribute):
            return {(*c, node.attr) for c in self.resolve(node.value)}
        name = self.getattr_name(node)
        if name is not None:
            return {(*c, name) for c in self.resolve(node.args[0])}  # type: ignore[attr-defined]
        return set()

    def getattr_name(self, node: ast.expr) -> str | None:
        """`getattr(x, NAME[, default])` with a statically known NAME: that name."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) in (2, 3) and not node.keywords):
            return None
        try:
            v = self.static.eval(node.args[1])
        except (NotStatic, RecursionError):
            return None
        return v.value if hasattr(v, "value") else None  # type: ignore[union-attr]

    def is_module(self, chain: Chain) -> bool:
        dotted = ".".join(chain)
        return dotted in self.imported or dotted in KNOWN_MODULES

    def possibly_builtin(self, name: str, stack: list[ast.AST]) -> bool:
        """False only where Python's scoping makes `name` a local of some enclosing function."""
        for node in reversed(stack):
            s = self.scopes[node]
            if s.kind == "function" and name in (s.params | s.assigned) and name not in s.declared_global:
                return False
        return True

    def is_own_self(self, node: ast.expr, stack: list[ast.AST]) -> bool:
        """`self` as the untouched first parameter of the enclosing method."""
        if not (isinstance(node, ast.Name) and node.id == "self"):
            return False
        for scope_node in reversed(stack):
            s = self.scopes[scope_node]
            if s.kind != "function":
                continue
            if isinstance(scope_node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return s.first_param == "self" and "self" not in s.assigned
            if "self" in s.params or "self" in s.assigned:
                return False
        return False
