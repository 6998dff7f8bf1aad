"""A candidate's source with its top-level names prefixed, so that several candidates share one file.

Scope-aware enough for candidate files: a function's arguments and assignments, a comprehension's targets and
a class body's own names shadow the module's; attributes (`self.ext`) and keywords are never names. Names a
candidate binds by import keep their name unless another file binds the same name to something else.
"""

from __future__ import annotations

import ast

from kevolve.contract import parse_python


def import_targets(tree: ast.Module) -> dict[str, str]:
    """Names bound by the module's top-level imports -> what they are ('torch.nn' for `import torch.nn as nn`)."""
    out: dict[str, str] = {}
    for s in tree.body:
        if isinstance(s, ast.Import):
            for a in s.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(s, ast.ImportFrom) and not s.level:
            for a in s.names:
                out[a.asname or a.name] = f"{s.module}.{a.name}"
    return out


def _stored(nodes: list[ast.AST]) -> set[str]:
    """Names a function or class body binds itself (not inside nested functions, classes, lambdas or
    comprehensions)."""
    found: set[str] = set()
    declared: set[str] = set()
    todo = list(nodes)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            declared.update(n.names)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            found.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(n.name)
            todo.extend(getattr(n, "decorator_list", []))
            continue
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            found.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue  # their own scopes (a comprehension's target is not the function's)
        todo.extend(ast.iter_child_nodes(n))
    return found - declared


def _args(a: ast.arguments) -> set[str]:
    every = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]
    return {x.arg for x in every}


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping
        self.scopes: list[tuple[str, set[str]]] = []  # (kind, names it binds), innermost last

    def _local(self, name: str) -> bool:
        for i, (kind, names) in enumerate(reversed(self.scopes)):
            if name in names and (kind != "class" or i == 0):  # a class body's names are not its methods'
                return True
        return False

    def _new(self, name: str) -> str:
        return self.mapping.get(name, name) if not self.scopes else name

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.name = self._new(node.name)
        for field in ("decorator_list", "returns"):
            value = getattr(node, field)
            setattr(node, field, [self.visit(d) for d in value] if isinstance(value, list) else
                    (self.visit(value) if value is not None else None))
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [self.visit(d) if d is not None else None for d in node.args.kw_defaults]
        self.scopes.append(("function", _args(node.args) | _stored(node.body)))
        node.body = [self.visit(s) for s in node.body]
        self.scopes.pop()
        return node

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self._new(node.name)
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        self.scopes.append(("class", _stored(node.body)))
        node.body = [self.visit(s) for s in node.body]
        self.scopes.pop()
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        self.scopes.append(("function", _args(node.args)))
        node.body = self.visit(node.body)
        self.scopes.pop()
        return node

    def _comprehension(self, node: ast.AST) -> ast.AST:
        targets = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}  # type: ignore[attr-defined]
        self.scopes.append(("function", targets))
        self.generic_visit(node)
        self.scopes.pop()
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.mapping and not self._local(node.id):
            node.id = self.mapping[node.id]
        return node

    def visit_Global(self, node: ast.Global) -> ast.AST:
        node.names = [self.mapping.get(n, n) for n in node.names]
        return node

    def visit_alias(self, node: ast.alias) -> ast.AST:
        if not self.scopes:  # a top-level import whose name is renamed binds the new name
            bound = node.asname or node.name.split(".")[0]
            if bound in self.mapping:
                node.asname = self.mapping[bound]
        return node


def prefixed(source: str, prefix: str, keep: set[str]) -> tuple[ast.Module, dict[str, str]]:
    """`source`'s tree with every top-level name but those in `keep` renamed to prefix + name, and the renaming."""
    from kevolve.contract import top_level_names

    tree = parse_python(source)
    assert isinstance(tree, ast.Module)
    mapping = {n: f"{prefix}{n}" for n in top_level_names(tree) - keep}
    # `import torch.nn` binds `torch`: renamed, it must become `import torch.nn as _kv1_torch`, which binds torch.nn
    for s in tree.body:
        if isinstance(s, ast.Import):
            for a in s.names:
                if a.asname is None and "." in a.name and a.name.split(".")[0] in mapping:
                    mapping.pop(a.name.split(".")[0])
    return _Renamer(mapping).visit(tree), mapping
