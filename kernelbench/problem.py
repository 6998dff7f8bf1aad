"""Load and statically validate a KernelBench-format problem file.

Only the parts that need no execution are checked here (syntax, the three required names); the
sandbox's reference worker checks the rest (constructor arguments, ``get_inputs`` raising) and reports
it as a one-line problem error.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kevolve.records import Problem

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
_LEVEL_RE = re.compile(r"level[_-]?(\d+)", re.IGNORECASE)


class ProblemError(ValueError):
    """A problem file the user gave is unusable; the message is one line for the user."""


class ProblemTooLarge(ProblemError):
    """The problem is fine, but its data does not fit this machine's memory limit (`memory_limit:`)."""


def top_level_names(tree: ast.Module) -> set[str]:
    """Names bound at module level by def, class, assignment or import."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def parse_source(source: str, label: str) -> ast.Module:
    """Parse Python source, turning a SyntaxError into a one-line message."""
    try:
        return ast.parse(source, filename=label)
    except SyntaxError as e:
        raise ProblemError(f"{label}: syntax error at line {e.lineno}: {e.msg}") from None
    except ValueError as e:  # e.g. null bytes
        raise ProblemError(f"{label}: not Python source: {e}") from None


def problem_from_source(source: str, path: str = "<problem>", name: str | None = None,
                        level: int | None = None) -> Problem:
    """Validate problem source statically and wrap it in a Problem record."""
    label = Path(path).name
    tree = parse_source(source, label)
    missing = [n for n in REQUIRED if n not in top_level_names(tree)]
    if missing:
        raise ProblemError(f"{label}: missing {', '.join(missing)} (a KernelBench problem defines "
                           "Model, get_inputs and get_init_inputs)")
    if level is None:
        m = _LEVEL_RE.search(str(Path(path).parent.name))
        level = int(m.group(1)) if m else None
    return Problem.from_source(source, path=str(path), name=name or Path(path).stem, level=level)


def load_problem(path: str | Path) -> Problem:
    """Read and validate a problem file; raises ProblemError with a one-line message."""
    p = Path(path)
    if not p.is_file():
        raise ProblemError(f"{p}: no such file")
    try:
        source = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemError(f"{p}: cannot read: {e}") from None
    return problem_from_source(source, str(p))
