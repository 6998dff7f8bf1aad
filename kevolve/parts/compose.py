"""The parts' candidates composed into one candidate of the whole model: plain source text, judged as a whole.

The composed file holds the problem's own source (less `get_inputs` / `get_init_inputs`), each chosen part's
candidate with its top-level names prefixed (`_kv2_ModelNew`, `_kv2_ext`: no clash between parts, nor with the
problem), and a `ModelNew` that builds the original `Model(*args)` first (so the judge's seed gives it the reference's
parameters) and then puts each part's `ModelNew(*its get_init_inputs())` in place of the submodules it stands for, their parameters and
buffers copied over in order. A part candidate that made other parameters than its module's fails the composed
model's construction, and one that computes something else makes the whole `incorrect`: the whole is judged like
any candidate, never assumed right because its parts were.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from kevolve.contract import parse_python, top_level_names
from kevolve.parts.decompose import Decomposition
from kevolve.parts.rename import import_targets, prefixed
from kevolve.parts.spell import without

_TAIL = '''

def _kv_adopt(new, old):
    """`new` (a part's ModelNew) holding `old`'s parameters and buffers, in order; ValueError if they differ."""
    import torch

    pairs = [(list(new.parameters()), list(old.parameters())), (list(new.buffers()), list(old.buffers()))]
    for mine, theirs in pairs:
        if [tuple(t.shape) for t in mine] != [tuple(t.shape) for t in theirs]:
            raise ValueError(f"a part's ModelNew ({{type(new).__name__}}) does not make the parameters and buffers "
                             f"of the {{type(old).__name__}} it replaces, in the same order")
    with torch.no_grad():
        for mine, theirs in pairs:
            for a, b in zip(mine, theirs):
                a.copy_(b)
    return new.train(old.training)


class ModelNew(Model):
    """{name} with {count} of its parts replaced by their optimized ModelNew (kevolve parts)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
{places}
'''


class CompositionError(ValueError):
    """The parts' candidates cannot be put in one file; the message is one line."""


def _future(tree: ast.Module) -> tuple[list[str], list[ast.stmt]]:
    """The `from __future__` imports' names, and the rest of the body."""
    names = [a.name for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "__future__" for a in s.names]
    return names, [s for s in tree.body if not (isinstance(s, ast.ImportFrom) and s.module == "__future__")]


def _extensions(tree: ast.Module) -> list[tuple[ast.Constant, str]]:
    """The `name="..."` constants of the module's `load_inline(...)` / `load(...)` calls (torch's build folders),
    each with what the call builds: the call's text, names of top-level string constants (`cpp_sources=[_src]`)
    replaced by their values."""
    strings = {t.id: s.value.value for s in tree.body if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant)
               and isinstance(s.value.value, str) for t in s.targets if isinstance(t, ast.Name)}

    class Resolve(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.Constant(strings[node.id]) if node.id in strings else node

    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and (getattr(n.func, "id", None) or getattr(n.func, "attr", None)) in ("load_inline", "load"):
            what = ast.dump(Resolve().visit(parse_python(ast.unparse(n), mode="eval")))
            found += [(k.value, what) for k in n.keywords if k.arg == "name" and isinstance(k.value, ast.Constant)
                      and isinstance(k.value.value, str)]
    return found


def _args(init: tuple) -> str:
    """A part's get_init_inputs() as call arguments (JSON turns its tuples into lists: either builds the same)."""
    return ", ".join(map(repr, init))


def compose(dec: Decomposition, chosen: Mapping[int, str]) -> str:
    """One candidate source for the whole model: `chosen` maps part indices (Part.index) to a candidate source of
    that part (defining ModelNew); every place of a part gets it. Raises CompositionError (one line)."""
    by_index = {p.index: p for p in dec.parts}
    unknown = sorted(set(chosen) - set(by_index))
    if unknown or not chosen:
        raise CompositionError(f"no part {unknown[0]} in {dec.problem.name} (it has {len(by_index)})" if unknown
                               else "no part chosen: nothing to compose")
    base = parse_python(without(dec.problem.source))
    assert isinstance(base, ast.Module)
    futures, base_body = _future(base)
    # a name is kept by the first file that imports it, renamed in any other that binds it to something else; the
    # problem's own definitions are never imported over
    bound = {n: "<problem>" for n in top_level_names(base)} | import_targets(base)
    trees, seen_ext = [], {c.value: what for c, what in _extensions(base)}
    for i in sorted(chosen):
        try:
            tree = parse_python(chosen[i])
        except (SyntaxError, ValueError) as e:
            raise CompositionError(f"part {i}'s candidate does not parse: {e}") from None
        assert isinstance(tree, ast.Module)
        mine = import_targets(tree)
        keep = {n for n, target in mine.items() if bound.setdefault(n, target) == target}
        tree, mapping = prefixed(chosen[i], f"_kv{i}_", keep)
        if "ModelNew" not in mapping:
            raise CompositionError(f"part {i}'s candidate defines no ModelNew")
        for const, what in _extensions(tree):  # two different extensions must not share a build folder
            if seen_ext.get(const.value, what) != what:
                const.value = f"{const.value}_kv{i}"
            seen_ext[const.value] = what
        names, body = _future(tree)
        futures += names
        trees.append((i, body))
    head = f"from __future__ import {', '.join(dict.fromkeys(futures))}\n\n" if futures else ""
    out = [head + f"# kevolve: {dec.problem.name} composed of optimized parts "
           + ", ".join(f"{i} ({', '.join(by_index[i].paths)})" for i, _ in trees),
           ast.unparse(ast.Module(body=base_body, type_ignores=[]))]
    for i, body in trees:
        p = by_index[i]
        out.append(f"# ---- part {i}: {p.spelled[:120]} at {', '.join(p.paths)} ----\n"
                   + ast.unparse(ast.Module(body=body, type_ignores=[])))
    # one call per place, each class named where it is made (the candidate policy refuses classes passed as values)
    places = "\n".join(f"        self.set_submodule({path!r}, _kv_adopt(_kv{i}_ModelNew({_args(by_index[i].init)}), "
                       f"self.get_submodule({path!r})))" for i, _ in trees for path in by_index[i].paths)
    out.append(_TAIL.format(places=places, name=dec.problem.name, count=len(trees)).lstrip("\n"))
    return "\n\n\n".join(out)
