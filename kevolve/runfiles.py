"""What an optimize run folder holds on disk, as versioned records, and how it is read back.

Written by `agent/rundir.py`; read by the agent when a run resumes and by `kevolve archive import`.
It lives on the ground floor so that the archive learns the format without importing the agent.

Format 2 (current):
  candidates/<id>.json   a `SavedCandidate`: the `Candidate` record (parents, operator, proposer, tokens,
                         cost) and, once evaluated, its `Evaluation`
  trials.jsonl           one `TrialLine` per finished job, with `format: 2`

Format 1 (run folders written before 2026-11-24): candidates/<id>.json was the bare `Evaluation` and
the candidate existed only as its source (<id>.py); trials.jsonl lines had no `format`. Its `Candidate`
is rebuilt from the source, the trial line that evaluated it (operator, parents, cost) and the LLM
named in config.json; token counts were never saved, so they read as 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from kevolve.kernel_params import legacy_choice
from kevolve.records import Candidate, Evaluation, Origin, Record

RUN_FORMAT = 2


class SavedCandidate(Record):
    """candidates/<id>.json: one candidate's record, and its verdict once it has one."""

    format: int = Field(default=RUN_FORMAT, description="the run folder format that wrote it")
    candidate: Candidate
    evaluation: Evaluation | None = Field(default=None, description="None until the sandbox returned")


class TrialLine(Record):
    """One line of trials.jsonl: a finished job. Field names are those format 1 wrote, so its lines read too."""

    format: int = Field(default=1, description="absent (1) in lines written before the format was versioned")
    job: str = Field(description="the job id, e.g. 'g3-j1'")
    generation: int
    island: int
    operator: Origin
    status: str = Field(description="evaluated, duplicate, no_code, llm_error or infra_error")
    candidate: str | None = Field(description="the candidate's id; None when no code came back")
    parents: tuple[str, ...] = ()
    outcome: str | None = None
    reason: str = ""
    speedup: float | None = None
    cost_usd: float = 0.0
    llm_cached: bool = False
    recovered: bool = Field(default=False, description="the verdict was read back from the folder after a kill")
    pid: int = 0


class RunFileError(ValueError):
    """A file of the run folder is not in any known format; the message is one line."""


def read_trials(folder: Path) -> list[TrialLine]:
    """Every readable line of trials.jsonl (a torn last line, or a foreign one, is left out)."""
    p = folder / "trials.jsonl"
    if not p.is_file():
        return []
    out = []
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(TrialLine.model_validate_json(line))
        except ValueError:
            continue
    return out


class RunFiles:
    """Reads a run folder's candidates in whichever format wrote them."""

    def __init__(self, folder: Path, problem_id: str) -> None:
        self.folder, self.problem_id = Path(folder), problem_id
        self._v1: tuple[dict[str, TrialLine], str] | None = None

    def load(self, cand_id: str) -> SavedCandidate | None:
        """The candidate's saved record; None when the folder has none. Raises RunFileError if unreadable."""
        p = self.folder / "candidates" / f"{cand_id}.json"
        return self._read(p) if p.is_file() else None

    def saved(self) -> Iterator[tuple[str, SavedCandidate | RunFileError]]:
        """(file name, record or why it could not be read) for every saved candidate, in name order."""
        for p in sorted((self.folder / "candidates").glob("*.json")):
            try:
                yield p.name, self._read(p)
            except RunFileError as e:
                yield p.name, e

    def _read(self, path: Path) -> SavedCandidate:
        try:
            data = json.loads(path.read_text())
            if isinstance(data, dict) and "format" in data:
                return SavedCandidate.model_validate(data)
            return self._from_v1(Evaluation.model_validate(data), path.with_suffix(".py"))
        except (OSError, ValueError) as e:
            raise RunFileError(f"{path.name}: {str(e).splitlines()[0][:200]}") from None

    def _from_v1(self, ev: Evaluation, source: Path) -> SavedCandidate:
        trials, proposer = self._v1_context()
        text = source.read_text()  # an offline candidate's choice was a comment in its source then
        cand = Candidate.from_source(text, self.problem_id, proposer=proposer,
                                     offline=legacy_choice(text, self.problem_id))
        t = trials.get(cand.id)
        if t is not None:
            cand = cand.model_copy(update={"parent_ids": t.parents, "origin": t.operator, "cost_usd": t.cost_usd})
        else:  # evaluated, but the kill came before its trial line: lineage unknown
            cand = cand.model_copy(update={"origin": Origin.IMPORTED, "proposer": "user"})
        ev = ev.model_copy(update={"candidate_id": cand.id, "problem_id": self.problem_id})
        return SavedCandidate(format=1, candidate=cand, evaluation=ev)

    def _v1_context(self) -> tuple[dict[str, TrialLine], str]:
        if self._v1 is None:
            trials = {t.candidate: t for t in read_trials(self.folder) if t.candidate and t.status == "evaluated"}
            self._v1 = (trials, _llm_label(self.folder / "config.json"))
        return self._v1


def _llm_label(config: Path) -> str:
    """The run's LLM as `provider:model` (the name its LLM client gives itself); 'user' if unknown."""
    try:
        llm = json.loads(config.read_text()).get("llm") or {}
        return f"{llm['provider']}:{llm['model']}"[:256]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "user"


__all__ = ["RUN_FORMAT", "RunFileError", "RunFiles", "SavedCandidate", "TrialLine", "read_trials"]
