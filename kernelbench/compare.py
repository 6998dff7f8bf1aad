"""`kevolve bench compare RUN_A RUN_B`: per-problem differences between two runs.

Problems are matched by content hash first (a renamed file is the same problem), then by level
and file name (an edited problem is shown, marked as changed).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from kevolve.kernelbench.metrics import ProblemResult, problem_results
from kevolve.kernelbench.store import RunStore
from kevolve.records import Record


class CompareError(ValueError):
    """A run folder cannot be read; one line for the user."""


class Diff(Record):
    key: str
    a: ProblemResult | None
    b: ProblemResult | None
    change: str = Field(description="improved, regressed, newly_solved, lost, same, only_a, only_b, changed_problem")
    ratio: float | None = Field(default=None, description="B's best speedup over A's")


def load_run(path: str | Path) -> list[ProblemResult]:
    root = Path(path)
    if not (root / "run.json").is_file():
        raise CompareError(f"{root}: not a bench run folder (no run.json)")
    return problem_results(RunStore(root).rows())


def _change(a: ProblemResult, b: ProblemResult, tol: float) -> tuple[str, float | None]:
    if a.status == "ok" and b.status == "ok" and a.speedup and b.speedup:
        ratio = b.speedup / a.speedup
        return ("improved" if ratio > 1 + tol else "regressed" if ratio < 1 - tol else "same"), ratio
    if b.status == "ok" and a.status != "ok":
        return "newly_solved", None
    if a.status == "ok" and b.status != "ok":
        return "lost", None
    return ("same" if a.status == b.status else "status_changed"), None


def compare(a_path: str | Path, b_path: str | Path, tol: float = 0.05) -> list[Diff]:
    a, b = load_run(a_path), load_run(b_path)
    by_id_b = {p.problem_id: p for p in b if p.problem_id}
    by_name_b = {(p.level, p.file): p for p in b}
    used: set[int] = set()
    diffs = []
    for pa in a:
        pb = by_id_b.get(pa.problem_id) if pa.problem_id else None
        renamed_or_same = pb is not None
        if pb is None:
            pb = by_name_b.get((pa.level, pa.file))
        key = f"L{pa.level}/{pa.name}"
        if pb is None:
            diffs.append(Diff(key=key, a=pa, b=None, change="only_a"))
            continue
        used.add(id(pb))
        change, ratio = _change(pa, pb, tol)
        if not renamed_or_same and pa.problem_id != pb.problem_id:
            change = "changed_problem"
        diffs.append(Diff(key=key, a=pa, b=pb, change=change, ratio=ratio))
    for pb in b:
        if id(pb) not in used:
            diffs.append(Diff(key=f"L{pb.level}/{pb.name}", a=None, b=pb, change="only_b"))
    return diffs


__all__ = ["CompareError", "Diff", "compare", "load_run"]
