"""The file contract: what a problem file and a solution file are.

A problem file (KernelBench format) binds ``Model``, ``get_inputs`` and ``get_init_inputs`` at module
level; a solution file binds ``ModelNew``. Only what needs no execution is checked here (syntax, the
required names); the sandbox's workers check the rest (constructor arguments, ``get_inputs`` raising,
``ModelNew`` being a class) and report it as a one-line error. Every package reads the contract here,
beside the records, rather than from the package that happens to load suites (``kernelbench/``).
"""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

from kevolve.records import Problem

_PARSE_LOCK = threading.Lock()


def parse_python(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """`ast.parse` under one process-wide lock. CPython 3.11 before 3.11.8 (and 3.12 before 3.12.2)
    corrupts the AST constructor's recursion counter when threads parse at once (gh-106905): seen here
    as "SystemError: AST constructor recursion depth mismatch" killing a replayed optimize run whose
    proposals are extracted in parallel threads."""
    with _PARSE_LOCK:
        return ast.parse(source, filename=filename, mode=mode)

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
SOLUTION_CLASS = "ModelNew"
_LEVEL_RE = re.compile(r"level[_-]?(\d+)", re.IGNORECASE)
# For source that does not parse (a reply cut off mid-block), the only evidence left is the text.
_CLASS_LINE = re.compile(rf"^class\s+{SOLUTION_CLASS}\b", re.M)


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
        return parse_python(source, filename=label)
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


def read_source(path: str | Path) -> str:
    """A problem or solution file's text; raises ProblemError with a one-line message."""
    p = Path(path)
    if not p.is_file():
        raise ProblemError(f"{p}: no such file")
    try:
        return p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemError(f"{p}: cannot read: {e}") from None


def load_problem(path: str | Path) -> Problem:
    """Read and validate a problem file; raises ProblemError with a one-line message."""
    return problem_from_source(read_source(path), str(Path(path)))


def _binds_model_new(tree: ast.Module) -> bool:
    return SOLUTION_CLASS in top_level_names(tree)


def defines_model_new(source: str) -> bool:
    """Whether the source binds ModelNew at module level, the name the sandbox's worker loads.

    Source that does not parse cannot be checked that way; for it (a reply cut off mid-block) a line
    opening `class ModelNew` counts, so the extractor can tell a truncated solution from prose."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return _CLASS_LINE.search(source) is not None
    return _binds_model_new(tree)


def check_solution_source(source: str, label: str = "solution") -> str | None:
    """None if the source parses and defines ModelNew; else a one-line reason."""
    try:
        tree = parse_source(source, label)
    except ProblemError as e:
        return str(e)
    if not _binds_model_new(tree):
        return f"{label}: no ModelNew defined (KernelBench convention: class ModelNew(nn.Module))"
    return None
