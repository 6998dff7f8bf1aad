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
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import Field

from kevolve.records import Candidate, Evaluation, Outcome, Problem, Record

if TYPE_CHECKING:
    from kevolve.archive.store import Entry

log = logging.getLogger(__name__)


BENCH_PROPOSER = "bench"


def bench_candidate(source: str, problem_id: str) -> Candidate:
    """A solution file a bench run evaluated, as the archive records it: imported, proposed by `bench`
    (not by a user). Live bench ingest and `kevolve archive import BENCH_FOLDER` both build it here."""
    from kevolve.records import Origin

    return Candidate.from_source(source, problem_id, origin=Origin.IMPORTED, proposer=BENCH_PROPOSER)


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
        self.counts = {"stored": 0, "skipped": 0, "failed": 0}

    def offer(self, problem: Problem, candidate: Candidate, evaluation: Evaluation, run_id: str,
              kernel_name: str = "") -> Ingested:
        """Store the candidate if the mode wants it; never raises for a database failure."""
        with self._lock:
            done = self._offer(problem, candidate, evaluation, run_id, kernel_name)
            self.counts[done.result] += 1
        if done.result == "failed":
            log.warning("archive: could not store %s: %s", candidate.id, done.reason)
        return done

    __call__ = offer

    def _offer(self, problem: Problem, candidate: Candidate, ev: Evaluation, run_id: str,
               kernel_name: str) -> Ingested:
        skip = lambda why: Ingested(candidate_id=candidate.id, result="skipped", reason=why)  # noqa: E731
        if self.mode is IngestMode.NONE:
            return skip("ingest is off")
        if ev.outcome is Outcome.INFRA_ERROR:
            return skip("infra_error: not a verdict on the candidate")
        speed = (ev.speedup or 0.0) if ev.ok else None
        key = (run_id, problem.id)
        if self.mode is IngestMode.WINNERS:
            if speed is None:
                return skip(f"not ok ({ev.outcome.value})")
            try:
                best = self._best_stored(key)
            except Exception as e:  # noqa: BLE001 - a broken archive is reported, not raised into the run
                return Ingested(candidate_id=candidate.id, result="failed", reason=_one_line(e))
            if speed <= best:
                return skip(f"not faster than {best:.3g}x, already stored by this run")
        from kevolve.archive.store import Entry

        entry = Entry(problem=problem, candidate=candidate, evaluation=ev, run_id=run_id, kernel_name=kernel_name)
        try:
            self.target.put_many([entry], run_kind=self.run_kind)
        except Exception as e:  # noqa: BLE001
            return Ingested(candidate_id=candidate.id, result="failed", reason=_one_line(e))
        if speed is not None and key in self._best:
            self._best[key] = max(self._best[key], speed)
        return Ingested(candidate_id=candidate.id, result="stored", reason="")

    def _best_stored(self, key: tuple[str, str]) -> float:
        if key not in self._best:
            found = self.target.run_best_speedup(*key)
            self._best[key] = float("-inf") if found is None else found
        return self._best[key]


def _one_line(e: BaseException) -> str:
    text = str(getattr(e, "orig", None) or e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


__all__ = ["IngestMode", "IngestTarget", "Ingested", "Ingestor", "parse_mode"]
