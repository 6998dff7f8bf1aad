"""Ingest while a run goes: each evaluated candidate is offered to the archive as its evaluation returns.

Modes (``IngestMode``, the ``--archive-ingest`` flag of ``kevolve optimize`` and ``kevolve bench``):

- ``all``: every evaluated candidate, whatever its verdict — except ``infra_error`` (the machine broke,
  not the candidate: never scored, so never archived);
- ``winners``: only *improving* candidates. A candidate is stored when its verdict is ``ok`` and its
  speedup over eager is strictly greater than that of every kernel this run has already stored for the
  same problem (the first ok one always is). What a run stores is its chain of records, one problem at
  a time; the last of each chain is the run's best. "Already stored" is read from the archive itself
  (once per run and problem, then kept in memory), so a run killed and resumed continues its chain
  rather than starting a new one;
- ``none``: nothing.

Every offer is one write transaction of its own (``put_many`` of one entry), made when the evaluation
returns, so a crash keeps everything offered before it. A failed write (database gone, disk full) is
logged and returned as data; it never stops the run, whose own folder still holds every verdict
(``kevolve archive import RUN_FOLDER`` adds them later).

Nothing heavy is imported here: the target (an ``Archive``) brings SQLAlchemy along.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Literal, Protocol

from pydantic import Field

from kevolve.archive.records import Entry
from kevolve.records import Candidate, Evaluation, Origin, Outcome, Problem, Record

log = logging.getLogger(__name__)


class IngestMode(StrEnum):
    """Which evaluated candidates of a run go into the archive."""

    WINNERS = "winners"
    ALL = "all"
    NONE = "none"


def parse_mode(text: str) -> IngestMode:
    """``winners`` / ``all`` / ``none`` (case-insensitive); ValueError with a one-line message otherwise."""
    try:
        return IngestMode(text.strip().lower())
    except ValueError:
        raise ValueError(f"--archive-ingest must be winners, all or none, not {text!r}") from None


# One converter per source kind: live ingest and `kevolve archive import` of the same run call the same one,
# so both give the same archive records.

BENCH_PROPOSER = "bench"


def never_archived(ev: Evaluation) -> str:
    """Why an evaluation is kept out of the archive whatever the mode ('' when it may go in)."""
    return "infra_error: not a verdict on the candidate" if ev.outcome is Outcome.INFRA_ERROR else ""


def run_entry(problem: Problem, candidate: Candidate, evaluation: Evaluation, run_id: str) -> Entry:
    """An `optimize` run's evaluated candidate: the Candidate record as the run made it (lineage, tokens)."""
    return Entry(problem=problem, candidate=candidate, evaluation=evaluation, run_id=run_id[:128])


def bench_candidate(source: str, problem_id: str) -> Candidate:
    """A solution file's candidate, as a bench run's plan builds it once: imported, proposed by `bench` (not
    by a user); live bench ingest and `kevolve archive import BENCH_FOLDER` both build it here."""
    return Candidate.from_source(source, problem_id, origin=Origin.IMPORTED, proposer=BENCH_PROPOSER)


def bench_entry(problem: Problem, candidate: Candidate, evaluation: Evaluation, bench_dir: str,
                solution: str) -> Entry:
    """A bench run's verdict on a solution file (`bench_dir`: the bench run folder's name)."""
    return Entry(problem=problem, candidate=candidate, evaluation=evaluation, run_id=f"bench-{bench_dir}"[:128],
                 kernel_name=Path(solution).stem[:256])


class IngestTarget(Protocol):
    """What the ingestor needs from an archive (``Archive`` implements it)."""

    def put_many(self, entries: Sequence[Entry], run_kind: str = "") -> int: ...
    def run_best_speedup(self, run_id: str, problem_id: str) -> float | None: ...


class Ingested(Record):
    """What became of one offer."""

    candidate_id: str
    result: Literal["stored", "skipped", "failed"]
    reason: str = Field(description="why skipped ('not ok', 'not faster than 2.10x', …) or why the write failed")


class Ingestor:
    """Offers a run's evaluated candidates to an archive, one transaction each (thread-safe)."""

    def __init__(self, target: IngestTarget, mode: IngestMode | str, run_kind: str = "") -> None:
        self.target, self.mode, self.run_kind = target, IngestMode(mode), run_kind
        self._lock = threading.Lock()
        self._best: dict[tuple[str, str], float] = {}  # (run, problem) -> best speedup stored (-inf: none yet)

    def offer(self, problem: Problem, candidate: Candidate, evaluation: Evaluation, run_id: str) -> Ingested:
        """Store an optimize run's candidate if the mode wants it; never raises for a database failure."""
        return self.offer_entry(run_entry(problem, candidate, evaluation, run_id))

    __call__ = offer

    def offer_entry(self, entry: Entry) -> Ingested:
        """Store the entry (made by one of the converters above) if the mode wants it."""
        with self._lock:
            done = self._offer(entry)
        if done.result == "failed":
            log.warning("archive: could not store %s: %s", entry.candidate.id, done.reason)
        return done

    def _offer(self, entry: Entry) -> Ingested:
        cid, ev = entry.candidate.id, entry.evaluation
        skip = lambda why: Ingested(candidate_id=cid, result="skipped", reason=why)  # noqa: E731
        if self.mode is IngestMode.NONE:
            return skip("ingest is off")
        if never_archived(ev):
            return skip(never_archived(ev))
        speed = (ev.speedup or 0.0) if ev.ok else None
        key = (entry.run_id or "", entry.problem.id)
        if ev.audit is not None:  # a stored winner measured again: its verdict binds, lower or overturned alike
            self._best.pop(key, None)
        elif self.mode is IngestMode.WINNERS:
            if speed is None:
                return skip(f"not ok ({ev.outcome.value})")
            try:
                best = self._best_stored(key)
            except Exception as e:  # noqa: BLE001 - a broken archive is reported, not raised into the run
                return Ingested(candidate_id=cid, result="failed", reason=_one_line(e))
            if speed <= best:
                return skip(f"not faster than {best:.3g}x, already stored by this run")
        try:
            self.target.put_many([entry], run_kind=self.run_kind)
        except Exception as e:  # noqa: BLE001
            return Ingested(candidate_id=cid, result="failed", reason=_one_line(e))
        if speed is not None and key in self._best:  # an audited one popped it above: read again when next needed
            self._best[key] = max(self._best[key], speed)
        return Ingested(candidate_id=cid, result="stored", reason="")

    def _best_stored(self, key: tuple[str, str]) -> float:
        if key not in self._best:
            found = self.target.run_best_speedup(*key)
            self._best[key] = float("-inf") if found is None else found
        return self._best[key]


def _one_line(e: BaseException) -> str:
    text = str(getattr(e, "orig", None) or e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


__all__ = ["BENCH_PROPOSER", "IngestMode", "IngestTarget", "Ingested", "Ingestor", "bench_candidate", "bench_entry",
           "never_archived", "parse_mode", "run_entry"]
