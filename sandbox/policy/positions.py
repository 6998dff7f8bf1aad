"""Where a module, a foreign class or os.environ may appear in a candidate: used, aliased, subclassed,
tested against, annotated with, or (classes) handed to the candidate's own functions — not stored or
carried where a static policy would lose track of it."""

from __future__ import annotations

import ast

from kevolve.sandbox.policy.chains import is_class, nn_layer_class
from kevolve.sandbox.policy.scope import Chain, Model
from kevolve.sandbox.policy.tables import ATTR_BUILTINS, TYPE_ARG_METHODS


def protected_value(model: Model, c: Chain) -> bool:
    """A module, a foreign class (torch.nn's layer classes excepted: `nn_layer_class`), or os.environ: what may
    not be carried where it cannot be followed."""
    return model.is_module(c) or is_class(c) and not nn_layer_class(c) or c[:2] == ("os", "environ") and len(c) == 2


def position_ok(model: Model, stack: list[ast.AST], node: ast.expr, classes_only: bool) -> bool:
    """Where a module or foreign class may appear: used, aliased, tested against — not stored
    or carried where the policy would lose track of it."""
    p = model.parents.get(node)
    while isinstance(p, (ast.IfExp, ast.BoolOp)) and node is not getattr(p, "test", None):
        node, p = p, model.parents.get(p)  # a choice between values goes where the choice goes
    if isinstance(p, ast.Attribute) and p.value is node:
        return True  # an attribute of it, followed as a dotted name
    if isinstance(p, ast.Tuple):  # isinstance(x, (A, B)), except (A, B): — and nothing else
        node, p = p, model.parents.get(p)
        if isinstance(p, ast.ExceptHandler):
            return True
        return isinstance(p, ast.Call) and isinstance(p.func, ast.Name) \
            and p.func.id in ("isinstance", "issubclass") and node in p.args
    if isinstance(p, ast.keyword) and isinstance(model.parents.get(p), ast.Call):
        return classes_only and _class_argument_ok(model, model.parents[p], p)  # type: ignore[arg-type]
    if isinstance(p, ast.Call):
        f = p.func
        if f is node:
            return True
        if isinstance(f, ast.Name) and f.id in ATTR_BUILTINS and p.args and p.args[0] is node:
            return True  # getattr(torch, "x"): followed by name (or reported as dynamic)
        if isinstance(f, ast.Name) and f.id in ("isinstance", "issubclass") and node in p.args:
            return True
        return classes_only and _class_argument_ok(model, p, node)
    if isinstance(p, ast.arguments):  # a default: the parameter is followed like an alias
        return classes_only
    if isinstance(p, ast.Assign):
        scope = model.scopes[stack[-1]]
        return p.value is node and len(p.targets) == 1 and isinstance(p.targets[0], ast.Name) \
            and scope.kind != "class"
    if isinstance(p, ast.NamedExpr):
        return p.value is node
    if isinstance(p, ast.keyword):
        return isinstance(model.parents.get(p), ast.ClassDef)
    if isinstance(p, ast.ClassDef):
        return node in p.bases
    if isinstance(p, (ast.ExceptHandler, ast.Compare, ast.MatchClass)):
        return True
    if isinstance(p, ast.Subscript):
        return classes_only or (p.value is node and _environ_item(model, p))
    return False


def _class_argument_ok(model: Model, call: ast.Call, arg: ast.AST) -> bool:
    """A class may be handed to a named parameter of the candidate's own functions and classes
    (then followed like an alias) and to x.view/type/to (legacy tensor types), nothing else."""
    f = call.func
    if isinstance(f, ast.Attribute):
        return f.attr in TYPE_ARG_METHODS and f.attr not in model.own
    params = model.callee_params(call)
    if params is None:
        return False
    if isinstance(arg, ast.keyword):
        return arg.arg in params
    return call.args.index(arg) < len(params)  # type: ignore[arg-type]


def _environ_item(model: Model, sub: ast.Subscript) -> bool:
    return ("os", "environ") in model.resolve(sub.value)
