"""The run folder: every candidate and its evaluation as it finishes, the checkpoint database, the
best `ModelNew` (drop-in), the winner's lineage and a short report.

    runs/<run_id>/
      problem.py  problem.json  config.json  checkpoints.sqlite
      candidates/<id>.py  candidates/<id>.json      source, and its Evaluation once evaluated
      trials.jsonl                                  one line per finished job, in finishing order
      best_model.py  lineage.json  report.md  result.json   written when the run ends
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
import time
from pathlib import Path

from kevolve.records import Evaluation, Problem


def atomic_write(path: Path, text: str) -> None:
    """Write-then-rename, so that a kill -9 never leaves a half-written file behind."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class RunFolder:
    """One run's folder on disk."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.candidates = self.path / "candidates"
        self._lock = threading.Lock()

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def checkpoint_db(self) -> Path:
        return self.path / "checkpoints.sqlite"

    @classmethod
    def create(cls, runs_dir: Path, problem: Problem) -> RunFolder:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        path = Path(runs_dir) / f"{problem.name}-{stamp}-{secrets.token_hex(2)}"
        path.mkdir(parents=True)
        run = cls(path)
        run.candidates.mkdir()
        (path / "problem.py").write_text(problem.source)
        atomic_write(path / "problem.json", problem.model_dump_json(indent=1))
        return run

    @classmethod
    def find(cls, runs_dir: Path, run: str) -> RunFolder | None:
        """A run named by id (under `runs_dir`) or by path; None if there is none."""
        for p in (Path(run), Path(runs_dir) / run):
            if (p / "problem.json").is_file() and (p / "config.json").is_file():
                return cls(p)
        return None

    def problem(self) -> Problem:
        return Problem.model_validate_json((self.path / "problem.json").read_text())

    def write_json(self, name: str, obj: object) -> None:
        atomic_write(self.path / name, json.dumps(obj, indent=1, default=str) + "\n")

    def read_json(self, name: str) -> dict:
        return json.loads((self.path / name).read_text())

    def write_text(self, name: str, text: str) -> None:
        atomic_write(self.path / name, text)

    def save_source(self, cand_id: str, source: str) -> None:
        p = self.candidates / f"{cand_id}.py"
        if not p.exists():
            atomic_write(p, source)

    def save_evaluation(self, ev: Evaluation) -> None:
        atomic_write(self.candidates / f"{ev.candidate_id}.json", ev.model_dump_json(indent=1))

    def load_evaluation(self, cand_id: str) -> Evaluation | None:
        """The evaluation persisted before a crash or kill, if this candidate had one."""
        p = self.candidates / f"{cand_id}.json"
        if not p.is_file():
            return None
        try:
            return Evaluation.model_validate_json(p.read_text())
        except ValueError:
            return None

    def log_trial(self, line: dict[str, object]) -> None:
        """Append one line to trials.jsonl (flushed and fsynced: it is the run's journal)."""
        with self._lock, open(self.path / "trials.jsonl", "a") as f:
            f.write(json.dumps(line, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def trial_log(self) -> list[dict]:
        p = self.path / "trials.jsonl"
        if not p.exists():
            return []
        return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
