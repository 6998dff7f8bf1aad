"""KernelBench's numbers from a run's rows: solved, correct %, fast_p, geomean speedup, outcomes.

Per problem the best ok candidate counts (KernelBench scores a problem by its candidate). fast_p is
the share of *all selected problems* that have a correct candidate more than p times faster than the
baseline (fast_0 = correct), as KernelBench defines it; the geometric mean is over solved problems.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from pydantic import AliasChoices, Field

from kevolve.kernelbench.store import ResultRow
from kevolve.records import Answer, Record

FAST_PS = (0.0, 1.0, 1.5, 2.0)


class ProblemResult(Record):
    """One problem's outcome in a run: its best candidate, or why it has none."""

    level: int
    number: int
    file: str
    problem_id: str | None
    status: str = Field(description="'ok' if any candidate is, else the most telling status")
    reason: str = ""
    candidates: int = 0
    ok_candidates: int = 0
    best_label: str = ""
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    runtime_ms: float | None = None
    eager_ms: float | None = Field(default=None, validation_alias=AliasChoices("eager_ms", "ref_ms"),
                                   description="eager's median ms (read as 'ref_ms' from older bench folders)")
    compile_ms: float | None = Field(default=None, validation_alias=AliasChoices("compile_ms", "compile_ref_ms"),
                                     description="torch.compile's median ms (older folders: 'compile_ref_ms')")
    compile_note: str = ""
    baseline: str = ""

    @property
    def name(self) -> str:
        return self.file.removesuffix(".py")


class LevelSummary(Record):
    level: int
    problems: int
    solved: int
    candidates: int
    correct_pct: float = Field(description="ok candidates / evaluated candidates, in percent")
    fast_eager: dict[str, float] = Field(description="'fast_1' -> share of problems, in percent")
    fast_compile: dict[str, float] | None = Field(description="None when no compile baseline was timed")
    geomean_speedup: float | None = None
    geomean_speedup_vs_compile: float | None = None
    outcomes: dict[str, int] = Field(default_factory=dict, description="candidate and problem statuses")


# When a problem has no ok candidate, it shows the one that got furthest.
_RANK = ["ok", "rejected", "incorrect", "runtime_error", "crashed", "timeout", "compile_error", "infra_error",
         "memory_limit", "problem_error", "unavailable", "no_solution"]


def problem_results(rows: list[ResultRow]) -> list[ProblemResult]:
    by_problem: dict[tuple[int, int, str], list[ResultRow]] = defaultdict(list)
    for r in rows:
        by_problem[(r.level, r.number, r.file)].append(r)
    out = []
    for (level, number, file), rs in sorted(by_problem.items()):
        cands = [r for r in rs if not r.is_problem_row]
        ok = [r for r in cands if r.status == "ok" and r.speedup is not None]
        best = max(ok, key=lambda r: r.speedup or 0.0) if ok else None
        worst = min(rs, key=lambda r: _RANK.index(r.status) if r.status in _RANK else len(_RANK))
        pick = best or worst
        out.append(ProblemResult(
            level=level, number=number, file=file, problem_id=pick.problem_id, status=pick.status,
            reason=pick.reason, candidates=len(cands), ok_candidates=len(ok), best_label=pick.label,
            speedup=pick.speedup if best else None, speedup_vs_compile=pick.speedup_vs_compile if best else None,
            runtime_ms=pick.runtime_ms, eager_ms=pick.eager_ms, compile_ms=pick.compile_ms,
            compile_note=pick.compile_note, baseline=pick.baseline))
    return out


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fast_p(results: list[ProblemResult], attr: str) -> dict[str, float]:
    n = len(results) or 1
    out = {}
    for p in FAST_PS:
        hits = sum(1 for r in results if r.status == "ok" and (getattr(r, attr) or 0.0) > p)
        out[f"fast_{p:g}"] = 100.0 * hits / n
    return out


def summarize(rows: list[ResultRow]) -> list[LevelSummary]:
    results = problem_results(rows)
    levels = sorted({r.level for r in results})
    out = []
    for lv in levels:
        rs = [r for r in results if r.level == lv]
        cand_rows = [r for r in rows if r.level == lv and not r.is_problem_row]
        solved = [r for r in rs if r.status == "ok"]
        has_compile = any(r.compile_ms is not None for r in rs)
        outcomes = Counter(r.status for r in rows if r.level == lv)
        out.append(LevelSummary(
            level=lv, problems=len(rs), solved=len(solved), candidates=len(cand_rows),
            correct_pct=100.0 * sum(r.status == "ok" for r in cand_rows) / (len(cand_rows) or 1),
            fast_eager=fast_p(rs, "speedup"),
            fast_compile=fast_p(rs, "speedup_vs_compile") if has_compile else None,
            geomean_speedup=geomean([r.speedup for r in solved if r.speedup]),
            geomean_speedup_vs_compile=geomean([r.speedup_vs_compile for r in solved if r.speedup_vs_compile]),
            outcomes=dict(sorted(outcomes.items(), key=lambda kv: -kv[1]))))
    return out


__all__ = ["FAST_PS", "LevelSummary", "ProblemResult", "bench_answer", "geomean", "problem_results", "summarize"]


def bench_answer(rows: list[ResultRow]) -> tuple[Answer, str]:
    """The run's answer (its exit code) and one line: improved when some problem has a correct kernel faster than
    eager, not_faster when kernels were correct but none beat eager, none_correct when none was correct."""
    results = problem_results(rows)
    speedups = [r.speedup for r in results if r.status == "ok" and r.speedup is not None]
    answer = Answer.of(max(speedups) if speedups else None)
    if answer is Answer.IMPROVED:
        faster = sum(1 for x in speedups if x > 1.0)
        return answer, f"{faster} of {len(results)} problem(s) faster than PyTorch eager (best {max(speedups):.2f}x)"
    if answer is Answer.NOT_FASTER:
        return answer, f"nothing beat eager on any problem (best {max(speedups):.2f}x): keep your modules"
    return answer, f"no correct kernel for any of {len(results)} problem(s): keep your modules"
