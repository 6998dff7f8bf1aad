"""Find an existing solution set's candidates for each problem of a suite.

Two layouts are understood, and may be mixed:

- KernelBench's generated samples (``scripts/generate_samples.py`` writes
  ``runs/RUN/level_1_problem_19_sample_0_kernel.py``), anywhere under the folder;
- a mirror of the suite: ``level1/19_ReLU.py`` (or any ``level1/19_*.py``) is problem 19's
  candidate, and a folder ``level1/19_ReLU/`` holds several candidates, one file each.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from pydantic import Field

from kevolve.records import Record

_SAMPLE_RE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
_LEVEL_DIR_RE = re.compile(r"^level_?(\d+)$")
_NUM_RE = re.compile(r"^(\d+)_")


class SolutionFile(Record):
    """One candidate file of a solution set."""

    level: int
    number: int
    path: str
    label: str = Field(description="which candidate of the problem: 'sample_0', a file stem, …")
    names: str = Field(default="", description="the problem its file or folder names after the number ('ReLU' of "
                                                "level1/19_ReLU.py); '' in KernelBench's sample layout")


def discover(root: str | Path) -> dict[tuple[int, int], list[SolutionFile]]:
    """(level, problem number) -> candidate files, in a stable order."""
    root = Path(root)
    found: dict[tuple[int, int], dict[str, SolutionFile]] = defaultdict(dict)

    def add(level: int, number: int, path: Path, label: str, names: str = "") -> None:
        found[(level, number)].setdefault(str(path.resolve()), SolutionFile(
            level=level, number=number, path=str(path), label=label, names=names))

    for path in sorted(root.rglob("*.py")):
        if any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(root).parts):
            continue
        m = _SAMPLE_RE.match(path.name)
        if m:
            add(int(m.group(1)), int(m.group(2)), path, f"sample_{m.group(3)}")
            continue
        rel = path.relative_to(root).parts
        level_i = next((i for i, p in enumerate(rel[:-1]) if _LEVEL_DIR_RE.match(p)), None)
        if level_i is None:
            continue
        level = int(_LEVEL_DIR_RE.match(rel[level_i]).group(1))  # type: ignore[union-attr]
        below = rel[level_i + 1:]
        if len(below) == 1 and (n := _NUM_RE.match(below[0])):
            add(level, int(n.group(1)), path, path.stem, path.stem[n.end():])
        elif len(below) == 2 and (n := _NUM_RE.match(below[0])):
            add(level, int(n.group(1)), path, path.stem, below[0][n.end():])
    return {k: sorted(v.values(), key=lambda s: (_natural(s.label), s.path)) for k, v in found.items()}


def _norm(name: str) -> str:
    return re.sub(r"[-_\s]", "", _NUM_RE.sub("", Path(name).stem, count=1)).lower()


def names_other(f: SolutionFile, problem_file: str, level_files: list[str]) -> bool:
    """Is the file named for another problem of the suite than the one of its number? (`level1/19_Softmax.py`
    where the suite's 19 is `19_ReLU.py` and its `23_Softmax.py` exists: another KernelBench version's numbering.)
    Any other name after the number still pairs (`19_fast.py`); case, '-' and '_' aside."""
    mine = _norm(problem_file)
    return bool(f.names) and _norm(f.names) != mine and _norm(f.names) in {_norm(p) for p in level_files}


def _natural(label: str) -> tuple[object, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", label))


__all__ = ["SolutionFile", "discover", "names_other"]
