"""A bench run on disk: run.json, results.jsonl and one result file per candidate.

Every finished evaluation is written first as its own file (atomically, by rename) and then
appended to results.jsonl (flushed and fsynced), so a `kill -9` loses at most the evaluation in
flight. Opening a run again reads both, skips a torn last line, recovers any result file whose
line is missing, and reports which work is finished; infrastructure failures are never finished.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from pydantic import AliasChoices, Field

from kevolve.records import Evaluation, Outcome, Record

log = logging.getLogger(__name__)

# Problem-level statuses (beside the candidate Outcomes). memory_limit: the problem is fine but its data
# does not fit this machine's memory limit; problem_error: the problem itself is wrong.
PROBLEM_ERROR, UNAVAILABLE, NO_SOLUTION, MEMORY_LIMIT = "problem_error", "unavailable", "no_solution", "memory_limit"
PROBLEM_STATUSES = (PROBLEM_ERROR, UNAVAILABLE, NO_SOLUTION, MEMORY_LIMIT)
# The format of run.json and results.jsonl lines. 1: before the field existed (the same fields
# otherwise: such files read as they are, and their rows say 2 once read).
BENCH_FORMAT = 2


class RunMeta(Record):
    """What a run was asked to do (run.json); a rerun of the same command finds it again."""

    name: str
    suite: str
    levels: tuple[int, ...]
    problems: str | None = None
    match: str | None = None
    solutions: str | None = None
    device: str
    devices: tuple[str, ...]
    device_fingerprint: str
    torch: str
    seed: int
    executor: str = "local"
    created_at: str = ""
    format: int = Field(default=BENCH_FORMAT, description="the bench folder format that wrote it (kernelbench/store.py)")


class ResultRow(Record):
    """One line of results.jsonl: a candidate's verdict, or a verdict on a whole problem."""

    level: int
    number: int
    file: str
    problem_id: str | None = None
    label: str = Field(default="", description="which candidate of the problem; '' for a problem row")
    solution: str = Field(default="", description="the candidate file it came from")
    candidate_id: str = ""
    status: str = Field(description="an Outcome, or problem_error / memory_limit / unavailable / no_solution")
    reason: str = ""
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    runtime_ms: float | None = None
    eager_ms: float | None = Field(default=None, validation_alias=AliasChoices("eager_ms", "ref_ms"),
                                   description="eager's median ms (read as 'ref_ms' from older bench folders)")
    compile_ms: float | None = Field(default=None, validation_alias=AliasChoices("compile_ms", "compile_ref_ms"),
                                     description="torch.compile's median ms (older folders: 'compile_ref_ms')")
    compile_note: str = Field(default="", description="why there is no torch.compile time (Evaluation.compile_note)")
    baseline: str = Field(default="", description="where the reference timings came from (Evaluation.baseline), "
                          "e.g. 'eager interleaved, compile cached': speedups are always against the interleaved eager")
    attempts: int = 1
    wall_s: float = 0.0
    worker: str = Field(default="", description="which lane or Ray node evaluated it")
    evaluation: Evaluation | None = None
    format: int = Field(default=BENCH_FORMAT, description="the bench folder format that wrote it (kernelbench/store.py)")

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.problem_id or f"L{self.level}/{self.file}", self.label, self.candidate_id)

    @property
    def finished(self) -> bool:
        return self.status != Outcome.INFRA_ERROR.value

    @property
    def is_problem_row(self) -> bool:
        return self.status in PROBLEM_STATUSES

    @classmethod
    def from_evaluation(cls, ev: Evaluation, **kw: object) -> ResultRow:
        return cls(candidate_id=ev.candidate_id, problem_id=ev.problem_id, status=ev.outcome.value,
                   reason=ev.reason, speedup=ev.speedup, speedup_vs_compile=ev.speedup_vs_compile,
                   runtime_ms=ev.runtime_ms, eager_ms=ev.eager_ms, compile_ms=ev.compile_ms,
                   compile_note=ev.compile_note, wall_s=ev.wall_s, evaluation=ev, **{"baseline": ev.baseline, **kw})  # type: ignore[arg-type]


class RunStore:
    """The files of one run folder. Thread-safe appends."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.jsonl = root / "results.jsonl"
        self.evals = root / "evals"
        self._lock = threading.Lock()

    def create_or_open(self, meta: RunMeta) -> RunMeta:
        """Write run.json if new; else return the stored meta (its seed wins, so reruns agree)."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "run.json"
        if path.exists():
            return RunMeta.model_validate_json(path.read_text())
        path.write_text(meta.model_dump_json(indent=1))
        return meta

    def meta(self) -> RunMeta:
        return RunMeta.model_validate_json((self.root / "run.json").read_text())

    def row_path(self, row: ResultRow) -> Path:
        pid = row.problem_id or "noid"
        name = f"{row.label or 'problem'}_{row.candidate_id or 'none'}.json".replace("/", "_")
        return self.evals / f"level{row.level}" / f"{row.number}_{pid}" / name

    def write(self, row: ResultRow) -> None:
        """The per-candidate file, then the JSONL line; both durable before returning."""
        text = row.model_dump_json()
        with self._lock:
            path = self.row_path(row)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
            self._append(text)

    def _append(self, text: str) -> None:
        with open(self.jsonl, "a", encoding="utf-8") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())

    def rows(self) -> list[ResultRow]:
        """Every stored row, latest per key wins; recovers result files missing from the JSONL."""
        latest: dict[tuple[str, str, str], ResultRow] = {}
        if self.jsonl.exists():
            for n, line in enumerate(self.jsonl.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    row = ResultRow.model_validate_json(line)
                except ValueError:
                    log.warning("%s:%d: unreadable line skipped (a torn write?)", self.jsonl, n)
                    continue
                latest[row.key] = row
        if self.evals.is_dir():
            for path in sorted(self.evals.rglob("*.json")):
                try:
                    row = ResultRow.model_validate_json(path.read_text())
                except (OSError, ValueError):
                    continue
                if row.key not in latest:
                    with self._lock:
                        self._append(row.model_dump_json())
                    latest[row.key] = row
        return list(latest.values())

    def finished_keys(self) -> set[tuple[str, str, str]]:
        return {r.key for r in self.rows() if r.finished}

    def write_json(self, name: str, data: object) -> Path:
        path = self.root / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, default=str))
        os.replace(tmp, path)
        return path


__all__ = ["MEMORY_LIMIT", "PROBLEM_ERROR", "UNAVAILABLE", "NO_SOLUTION", "ResultRow", "RunMeta", "RunStore"]
