"""Who is who in a candidate, statically: import bindings, aliases, scopes and simple assignments.

Names are followed without regard to scope where that errs on the side of caution (a name that any
import or alias binds is taken to be that module everywhere), and with Python's scoping rules where
caution needs them (a builtin such as `open` is only "the builtin" where no function scope binds it).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field

from kevolve.sandbox.policy.chains import TYPE, TYPE_OF, binds_self, canonical, is_class
from kevolve.sandbox.policy.static import NotStatic, StaticEval
from kevolve.sandbox.policy.tables import KNOWN_MODULES, OWN_SUBMODULES, REROOT

Chain = tuple[str, ...]
_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                    ast.GeneratorExp)
SCOPES = (ast.Module, ast.ClassDef, *_FUNCTION_SCOPES)


def _off_self(node: ast.expr) -> bool:
    """An expression reached from `self` (self.a.b, self.layers[0], self.modules(), getattr(self.m, n))."""
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call):
            getattr_call = isinstance(node.func, ast.Name) and node.func.id == "getattr" and node.args
            node = node.args[0] if getattr_call else node.func  # type: ignore[index]
        else:
            return isinstance(node, ast.Name) and node.id == "self"


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
        self.own: dict[str, ast.AST] = {}  # classes and functions the candidate defines
        self.scopes: dict[ast.AST, Scope] = {}
        self._aliases: list[tuple[str, ast.expr]] = []
        self._calls: list[ast.Call] = []
        self.loop_values: dict[str, list[ast.expr]] = defaultdict(list)  # for NAME in (literal, …)
        self.bindings: dict[str, int] = defaultdict(int)  # how many statements bind each name
        # `x *= y`, `x /= y` … (every augmented assignment but +=, which `values` keeps): the name stays what it held,
        # or becomes an arithmetic result; not a static value, but a binding that keeps a fresh object fresh
        self.augmented: dict[str, list[ast.expr]] = defaultdict(list)
        self.made: dict[str, list[bool]] = defaultdict(list)  # per binding: the candidate made the object
        self._functions: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = []
        self._defs: list[tuple[ast.AST, ast.AST | None]] = []  # (function, enclosing scope)
        self._collect(tree, [])
        self.static = StaticEval(self.values, self.opaque, self.resolve, self.own_receiver)
        self._resolve_aliases()
        for fn, outer in self._defs:  # @staticmethod, a lambda, an unknown decorator: no own self
            if not binds_self(fn, outer, self.resolve):
                self.scopes[fn].first_param = None

    # ----- collection -------------------------------------------------------------------------
    def _collect(self, node: ast.AST, stack: list[ast.AST]) -> None:
        if isinstance(node, SCOPES):
            kind = "module" if isinstance(node, ast.Module) else "class" if isinstance(node, ast.ClassDef) \
                else "function"
            self.scopes[node] = Scope(kind)
            stack = [*stack, node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                self._params(node.args, self.scopes[node])
                self._defs.append((node, stack[-2] if len(stack) > 1 else None))
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
                self.opaque.add(child.arg)
                self.bindings[child.arg] += 1
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
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            self._functions.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            outer = self.scopes[stack[-2]]
            outer.assigned.add(node.name)
            self.own.setdefault(node.name, node)
            self.opaque.add(node.name)
            self.bindings[node.name] += 1
            if outer.kind == "class":  # a method or property named X: self.X is not a plain value
                self.opaque.add("." + node.name)
                if node.name in ("__getattr__", "__getattribute__"):
                    self.opaque.add(".*")
            if isinstance(node, ast.ClassDef) and any(k.arg == "metaclass" for k in node.keywords):
                self.opaque.add(".*")
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            self._attr_value(node)
        elif isinstance(node, ast.Call):
            self._calls.append(node)
            if isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
                name = node.args[1] if len(node.args) > 1 else None
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    self.opaque.add(".*")  # any attribute may be set to anything: none is static
                elif node.func.id == "setattr" and len(node.args) == 3:
                    self.values["." + name.value].append(("=", node.args[2]))
                else:
                    self.opaque.add("." + name.value)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(node, scope)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            scope.declared_global.update(node.names if isinstance(node, ast.Global) else ())
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            self.bindings[node.id] += 1
            target_scope = scope
            if isinstance(self.parents.get(node), ast.NamedExpr):
                target_scope = next(self.scopes[s] for s in reversed(stack)
                                    if not isinstance(s, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)))
            if not self._rebinds_to_itself(node, scope):
                target_scope.assigned.add(node.id)
            self._value_of(node, scope)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.assigned.add(node.name)
            self.opaque.add(node.name)
            self.bindings[node.name] += 1
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            scope.assigned.add(node.name)
            self.opaque.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            scope.assigned.add(node.rest)
            self.opaque.add(node.rest)
        elif isinstance(node, ast.arg):
            self.opaque.add(node.arg)
            self.bindings[node.arg] += 1

    def _made_binding(self, name: ast.Name, parent: ast.AST | None) -> bool:
        """`x = OwnClass(...)`, `x = self.<...>` or `for x in self.<...>`: an object the candidate made
        or that hangs off its own self."""
        if isinstance(parent, ast.Assign) and parent.targets == [name]:
            v = parent.value
            own_class = isinstance(v, ast.Call) and isinstance(v.func, ast.Name) \
                and isinstance(self.own.get(v.func.id), ast.ClassDef)
            return own_class or _off_self(v)
        if isinstance(parent, (ast.For, ast.comprehension)) and parent.target is name:
            it = parent.iter
            return _off_self(it) or isinstance(it, (ast.List, ast.Tuple)) and bool(it.elts) \
                and all(_off_self(e) for e in it.elts)
        return False

    def _rebinds_to_itself(self, node: ast.Name, scope: Scope) -> bool:
        """`self = self.to(...)`: a parameter rebound to something reached from itself stays itself."""
        parent = self.parents.get(node)
        if node.id not in scope.params or not isinstance(parent, ast.Assign) or parent.targets != [node]:
            return False
        root = parent.value
        while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
            root = root.func if isinstance(root, ast.Call) else root.value
        return isinstance(root, ast.Name) and root.id == node.id

    def _attr_value(self, node: ast.Attribute) -> None:
        """Attribute stores, by attribute name (".X"): `self.X` is static only if every store of an
        attribute X anywhere is."""
        if not self._record("." + node.attr, node):
            self.opaque.add("." + node.attr)

    def _record(self, key: str, target: ast.expr) -> bool:
        """Record `key`'s value if `target` is assigned simply (=, +=, annotated, walrus)."""
        parent = self.parents.get(target)
        if isinstance(parent, ast.Assign) and target in parent.targets:
            self.values[key].append(("=", parent.value))
        elif isinstance(parent, ast.AnnAssign) and parent.value is not None:
            self.values[key].append(("=", parent.value))
        elif isinstance(parent, ast.AugAssign) and isinstance(parent.op, ast.Add):
            self.values[key].append(("+=", parent.value))
        elif isinstance(parent, ast.NamedExpr):
            self.values[key].append(("=", parent.value))
        elif isinstance(parent, ast.Tuple) and isinstance(self.parents.get(parent), ast.Assign) \
                and isinstance(getattr(self.parents[parent], "value", None), ast.Tuple) \
                and len(self.parents[parent].value.elts) == len(parent.elts):  # type: ignore[attr-defined]
            pair = self.parents[parent].value.elts[parent.elts.index(target)]  # type: ignore[attr-defined]
            self.values[key].append(("=", pair))
        else:
            return False
        return True

    def _value_of(self, name: ast.Name, scope: Scope) -> None:
        """Record a simple assignment's value (for static evaluation and aliases); else opaque."""
        parent = self.parents.get(name)
        self.made[name.id].append(self._made_binding(name, parent))
        if isinstance(parent, ast.AugAssign) and not isinstance(parent.op, ast.Add):
            self.augmented[name.id].append(parent.value)
        if isinstance(parent, (ast.For, ast.comprehension)) and parent.target is name \
                and isinstance(parent.iter, (ast.List, ast.Tuple)):
            self.loop_values[name.id] += parent.iter.elts
        else:
            self.loop_values[name.id].append(name)  # bound otherwise too: not a fixed choice
        if scope.kind == "class" and not self._record("." + name.id, name):  # also read as self.X
            self.opaque.add("." + name.id)
        if not self._record(name.id, name):
            self.opaque.add(name.id)
            return
        parent = self.parents.get(name)
        if isinstance(parent, ast.NamedExpr) or isinstance(parent, ast.Assign) and scope.kind != "class":
            self._aliases.append((name.id, parent.value))

    def _import(self, node: ast.Import | ast.ImportFrom, scope: Scope) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = tuple(a.name.split("."))
                self.imported.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
                bound = a.asname or parts[0]
                self.names[bound].add(parts if a.asname else parts[:1])
                scope.assigned.add(bound)
                self.opaque.add(bound)
                self.bindings[bound] += 1
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
            self.bindings[bound] += 1

    def _resolve_aliases(self) -> None:
        for _ in range(8):  # aliases of aliases, and classes handed to the candidate's functions
            changed = False
            for target, value in [*self._aliases, *self._class_arguments()]:
                new = self.resolve(value) - self.names[target]
                if new:
                    self.names[target] |= new
                    changed = True
            if not changed:
                return

    def _class_arguments(self) -> list[tuple[str, ast.expr]]:
        """(parameter, value) for class-valued defaults, and for arguments of calls of the candidate's
        own functions and classes: such parameters are followed like aliases."""
        out: list[tuple[str, ast.expr]] = []
        for fn in self._functions:
            a = fn.args
            pos = [*a.posonlyargs, *a.args]
            out += [(p.arg, d) for p, d in zip(pos[len(pos) - len(a.defaults):], a.defaults)]
            out += [(p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        for call in self._calls:
            params = self.callee_params(call)
            if params is None:
                continue
            out += [(p, v) for p, v in zip(params, call.args)]
            out += [(k.arg, k.value) for k in call.keywords if k.arg in params]
        return [(p, v) for p, v in out if any(is_class(c) for c in self.resolve(v))]

    def callee_params(self, call: ast.Call) -> list[str] | None:
        """The named parameters a call of one of the candidate's own functions or classes binds (a
        class's own __init__ minus self), or None when the callee is anything else: a name bound more
        than once, decorated, a class without its own __init__ or with __new__ or a metaclass."""
        f = call.func
        fn = self.own.get(f.id) if isinstance(f, ast.Name) and self.bindings.get(f.id) == 1 else None
        if fn is None or getattr(fn, "decorator_list", None):
            return None
        if isinstance(fn, ast.ClassDef):
            if fn.keywords or any(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.name == "__new__"
                                  for b in fn.body):
                return None
            fn = next((b for b in fn.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)
            if fn is None or fn.decorator_list:
                return None
            return [p.arg for p in (fn.args.posonlyargs + fn.args.args)[1:] + fn.args.kwonlyargs]
        a = fn.args  # type: ignore[union-attr]
        return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]

    # ----- queries ----------------------------------------------------------------------------
    def resolve(self, node: ast.expr) -> set[Chain]:
        """Every dotted name an expression may stand for (empty when it is not import-rooted), cut
        to the last dangerous module it passes through (`torch.os.environ` is `os.environ`)."""
        return {canonical(c) for c in self._resolve(node)}

    def _resolve(self, node: ast.expr) -> set[Chain]:
        if isinstance(node, ast.Name):
            bound = set(self.names.get(node.id, ()))
            return bound | {TYPE} if node.id == "type" else bound  # even where a local shadows it: caution
        if isinstance(node, ast.Attribute):
            return {(*c, node.attr) for c in self._resolve(node.value)}
        if isinstance(node, ast.IfExp):  # `norm_layer if cond else None`: either
            return self._resolve(node.body) | self._resolve(node.orelse)
        if isinstance(node, ast.BoolOp):
            return set().union(*(self._resolve(v) for v in node.values))
        name = self.getattr_name(node)
        if name is not None:
            return {(*c, name) for c in self._resolve(node.args[0])}  # type: ignore[attr-defined]
        if isinstance(node, ast.Call):
            f = node.func.value if isinstance(node.func, ast.Subscript) else node.func  # type[X](x) is type(x)
            if TYPE in self._resolve(f) and (len(node.args) == 1 or f is not node.func):
                return {TYPE_OF}
        return set()

    def own_receiver(self, node: ast.expr) -> bool:
        """`self` or one of the candidate's classes (bound once): whose attributes the candidate sets."""
        return isinstance(node, ast.Name) and (node.id == "self" or isinstance(self.own.get(node.id), ast.ClassDef)
                                               and self.bindings.get(node.id) == 1)

    def own_instance(self, node: ast.expr) -> bool:
        """A call that makes a new instance of one of the candidate's own classes."""
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and isinstance(self.own.get(node.func.id), ast.ClassDef) and self.bindings.get(node.func.id) == 1

    def made_here(self, name: str) -> bool:
        """Every binding of `name` is a new instance of an own class, or a loop over what hangs off self."""
        return bool(self.made.get(name)) and all(self.made[name])

    def param_kind(self, name: str, stack: list[ast.AST]) -> str:
        """'first' (a method's self, cls or ctx), 'param', 'local' or 'global': what binds `name` here."""
        for i in range(len(stack) - 1, -1, -1):
            s = self.scopes[stack[i]]
            if s.kind != "function" or name in s.declared_global:
                continue
            if name in s.params:
                method = i > 0 and isinstance(stack[i - 1], ast.ClassDef) and name not in s.assigned
                return "first" if method and name == s.first_param else "param"
            if name in s.assigned:
                return "local"
        return "global"

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

    def choices(self, node: ast.expr) -> list[str] | None:
        """The names a loop variable takes when it only ever iterates over a literal list of
        strings (`for p in ("weight", "bias"): getattr(m, p)`); else None."""
        if not isinstance(node, ast.Name) or not self.loop_values.get(node.id):
            return None
        out = []
        for e in self.loop_values[node.id]:
            try:
                v = self.static.eval(e) if not isinstance(e, ast.Name) or e.ctx.__class__ is ast.Load else None
            except (NotStatic, RecursionError):
                return None
            if not hasattr(v, "value"):
                return None
            out.append(v.value)  # type: ignore[union-attr]
        return out

    def is_module(self, chain: Chain) -> bool:
        """Imported as a module, a known submodule, or a dangerous module held by an allowed one."""
        dotted = ".".join(chain)
        return dotted in self.imported or dotted in KNOWN_MODULES or len(chain) > 1 and chain[-1] in REROOT \
            and dotted not in OWN_SUBMODULES  # torch.os: a dangerous module held by an allowed one

    def possibly_builtin(self, name: str, stack: list[ast.AST]) -> bool:
        """False only where Python's scoping makes `name` a local of some enclosing function."""
        for node in reversed(stack):
            s = self.scopes[node]
            if s.kind == "function" and name in (s.params | s.assigned) and name not in s.declared_global:
                return False
        return True

    def is_own_self(self, node: ast.expr, stack: list[ast.AST]) -> bool:
        """`self` as the untouched first parameter of the enclosing method, never handed a class."""
        if not (isinstance(node, ast.Name) and node.id == "self") or self.resolve(node):
            return False
        return self.param_kind("self", stack) == "first"
