"""A bench run's verdicts into the archive, each as it is written to the run folder.

The rows the executors stream back carry the full `Evaluation`; the problem and the candidate's source
come from the plan. Whether a row is stored is the archive ingestor's call (`kevolve.archive.ingest`:
all, or winners — ok and faster than everything this bench run already stored for the problem).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from kevolve.kernelbench.runner import ProblemJob
from kevolve.kernelbench.store import ResultRow
from kevolve.records import Candidate, Problem

log = logging.getLogger(__name__)


def bench_ingestor(mode: str, archive_url: str | None, jobs: list[ProblemJob],
                   run_id: str) -> Callable[[ResultRow], None] | None:
    """A callback offering each candidate row to the archive; None when ingest is off or unavailable."""
    from kevolve.archive.ingest import IngestMode

    if IngestMode(mode) is IngestMode.NONE or not jobs:
        return None
    try:
        from kevolve.archive import open_archive
        from kevolve.archive.ingest import Ingestor

        archive = open_archive(archive_url)
    except ImportError as e:
        log.warning("archive ingest skipped: %s (pip install 'kevolve[archive]')", e)
        return None
    ingestor = Ingestor(archive, mode, run_kind="bench")
    problems: dict[str, Problem] = {}
    sources: dict[tuple[str, str], str] = {}
    for job in jobs:
        p = job.problem.problem
        assert p is not None
        problems[p.id] = p
        for cf in job.candidates:
            sources[(p.id, Candidate.from_source(cf.source, p.id).id)] = cf.source

    def offer(row: ResultRow) -> None:
        ev = row.evaluation
        if ev is None or row.problem_id not in problems:
            return  # a problem verdict, or a harness error with no evaluation: nothing to archive
        source = sources.get((ev.problem_id, ev.candidate_id))
        if source is None:
            log.warning("archive: no source for candidate %s of %s", ev.candidate_id, row.file)
            return
        cand = Candidate.from_source(source, ev.problem_id)
        ingestor.offer(problems[ev.problem_id], cand, ev, run_id, kernel_name=Path(row.solution).stem)

    return offer


__all__ = ["bench_ingestor"]
