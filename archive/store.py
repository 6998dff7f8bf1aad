"""The archive: ``Archive.put`` / ``search`` / ``get`` over SQLite (default) or PostgreSQL.

Writes are one transaction per call (``put`` or ``put_many``): a crash leaves either all of an
entry's rows (problem, candidate, tags, index rows, evaluation, lineage) or none. Embeddings are
computed before the transaction opens, so the write lock is held for milliseconds, not for a model
forward; on SQLite, writers queue on ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from typing import Iterator

import numpy as np
from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from kevolve.archive import queries
from kevolve.archive.db import WRITE, make_engine, upgrade
from kevolve.archive.embed import Embedder, default_embedder
from kevolve.archive.index import index_for
from kevolve.archive.catalog import Catalog
from kevolve.archive.models import (ArchiveStateRow, CandidateRow, EvaluationRow, LineageRow, ProblemRow, RunRow,
                                    TagRow, utcnow)
from kevolve.archive.records import (ArchivedKernel, ArchiveStats, Entry, KernelDetail, KernelFilter, ProblemSummary, RunSummary,
                                     max_diff, split_problem_name)
from kevolve.archive.search import hybrid_search, ranked_in_memory
from kevolve.archive.techniques import techniques
from kevolve.archive.text import kernel_text, keyword_doc, problem_text
from kevolve.records import Candidate, Evaluation, Outcome, Problem

log = logging.getLogger(__name__)


def check_storable(e: Entry) -> None:
    """Refuse what a database cannot hold faithfully: NUL in text, NaN or infinity, over-long names."""
    limits = {"problem name": (e.problem.name, 256), "device": (e.evaluation.device, 256),
              "proposer": (e.candidate.proposer, 256), "kernel name": (e.kernel_name, 256),
              "run id": (e.run_id or "", 128), "problem id": (e.problem.id, 64), "candidate id": (e.candidate.id, 64),
              **{f"parent id {p[:20]}": (p, 64) for p in e.candidate.parent_ids}}
    for what, (value, limit) in limits.items():
        if len(value) > limit:
            raise ValueError(f"{what} is longer than {limit} characters")
    stack: list[object] = [e.model_dump()]
    while stack:
        x = stack.pop()
        if isinstance(x, str) and "\x00" in x:
            raise ValueError("text with a NUL character cannot be stored")
        if isinstance(x, float) and not math.isfinite(x):
            raise ValueError("a number is NaN or infinite")
        if isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list | tuple):
            stack.extend(x)


def _speedups(ev: Evaluation) -> tuple[float | None, float | None]:
    try:
        return ev.speedup, ev.speedup_vs_compile
    except ZeroDivisionError:  # an imported record with a zero runtime
        return None, None


def _rank(outcome: str, speedup: float | None) -> tuple[int, float]:
    """Order of verdicts: an ok kernel beats any other; among ok ones the faster wins."""
    return (1, speedup or 0.0) if outcome == Outcome.OK.value else (0, 0.0)


def _audited(conn: Connection, cand_pk: int) -> bool:
    """Whether any stored evaluation of this candidate carries an audit (whose verdict then holds its best)."""
    records = conn.scalars(select(EvaluationRow.record).where(EvaluationRow.candidate_pk == cand_pk))
    return any(isinstance(r, dict) and r.get("audit") for r in records)


def _bump(conn: Connection) -> None:
    """Tell search caches (in this or any process) that the archive changed; last, so the row lock is brief."""
    conn.execute(update(ArchiveStateRow).where(ArchiveStateRow.id == 1)
                 .values(generation=ArchiveStateRow.generation + 1))


class Archive:
    """The kernel archive at a database URL (``sqlite:///…`` or ``postgresql+psycopg://…``)."""

    def __init__(self, url: str, embedder: Embedder | None = None) -> None:
        self.url = url
        self.engine = make_engine(url)
        upgrade(self.engine)
        self.embedder: Embedder = embedder or default_embedder()
        self.index = index_for(self.engine.dialect.name)
        self.catalog = Catalog(self.index)
        self._insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            yield conn

    # ---------------------------------------------------------------- writes
    def put(self, problem: Problem, candidate: Candidate, evaluation: Evaluation,
            run_id: str | None = None) -> str:
        """Store one evaluated candidate (idempotent for the same evaluation); returns the kernel id."""
        self.put_many([Entry(problem=problem, candidate=candidate, evaluation=evaluation, run_id=run_id)])
        return candidate.id

    def put_many(self, entries: Sequence[Entry], run_kind: str = "") -> int:
        """Store entries in one transaction (embeddings batched); returns how many new kernels were added."""
        if not entries:
            return 0
        for e in entries:
            if e.candidate.problem_id != e.problem.id or e.evaluation.candidate_id != e.candidate.id:
                raise ValueError(f"entry for candidate {e.candidate.id}: problem/candidate/evaluation ids disagree")
            check_storable(e)
        with self._read() as conn:
            pids = {e.problem.id for e in entries}
            cids = {e.candidate.id for e in entries}
            have_p = set(conn.scalars(select(ProblemRow.id).where(ProblemRow.id.in_(pids))))
            have_c = set(conn.scalars(select(CandidateRow.id).where(CandidateRow.id.in_(cids))))
        new_p = {e.problem.id: e.problem for e in entries if e.problem.id not in have_p}
        new_c = {e.candidate.id: e for e in entries if e.candidate.id not in have_c}
        pvec = self._embed({pid: problem_text(split_problem_name(p.name)[1], p.source) for pid, p in new_p.items()})
        tags = {cid: techniques(e.candidate.source) for cid, e in new_c.items()}
        kvec = self._embed({cid: kernel_text(split_problem_name(e.problem.name)[1], tags[cid], e.candidate.source)
                            for cid, e in new_c.items()})
        added = 0
        with self.engine.connect().execution_options(**WRITE) as conn, conn.begin():
            for e in entries:
                added += self._put_one(conn, e, pvec, kvec, tags, run_kind)
            _bump(conn)
        log.info("archive: %d entries, %d new kernels", len(entries), added)
        return added

    def _embed(self, texts: dict[str, str]) -> dict[str, object]:
        keys = list(texts)
        vecs = self.embedder.embed([texts[k] for k in keys]) if keys else []
        return dict(zip(keys, vecs, strict=True))

    def _problem_pk(self, conn: Connection, p: Problem, pvec: dict) -> int:
        task_id, op_name = split_problem_name(p.name)
        pk = conn.scalar(self._insert(ProblemRow).values(
            id=p.id, name=p.name, op_name=op_name, level=p.level, task_id=task_id, source=p.source, path=p.path,
            created_at=utcnow()).on_conflict_do_nothing(index_elements=["id"]).returning(ProblemRow.pk))
        if pk is None:
            return conn.scalar(select(ProblemRow.pk).where(ProblemRow.id == p.id))
        vec = pvec.get(p.id)
        if vec is None:  # another writer removed it between our read and this transaction
            vec = self.embedder.embed([problem_text(op_name, p.source)])[0]
        self.index.add_problem(conn, pk, vec)
        return pk

    def _put_one(self, conn: Connection, e: Entry, pvec: dict, kvec: dict, tags: dict, run_kind: str) -> int:
        p, c, ev = e.problem, e.candidate, e.evaluation
        problem_pk = self._problem_pk(conn, p, pvec)
        if e.run_id:
            conn.execute(self._insert(RunRow).values(id=e.run_id, kind=run_kind, created_at=utcnow(), meta={})
                         .on_conflict_do_nothing(index_elements=["id"]))
        speedup, speedup_c = _speedups(ev)
        best = dict(best_outcome=ev.outcome.value, best_speedup=speedup, best_speedup_compile=speedup_c,
                    best_runtime_ms=ev.runtime_ms, ref_runtime_ms=ev.eager_ms, compile_ref_runtime_ms=ev.compile_ms,
                    device=ev.device)
        tg = tags.get(c.id) or techniques(c.source)
        cand_pk = conn.scalar(self._insert(CandidateRow).values(
            id=c.id, problem_pk=problem_pk, kernel_name=e.kernel_name or p.name, source=c.source,
            origin=c.origin.value, proposer=c.proposer, prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens, cost_usd=c.cost_usd, generation=c.generation,
            techniques=",".join(tg),
            created_at=utcnow(), **best).on_conflict_do_nothing(index_elements=["id"]).returning(CandidateRow.pk))
        added = cand_pk is not None
        if added:
            if tg:
                conn.execute(insert(TagRow), [{"candidate_pk": cand_pk, "tag": t} for t in tg])
            vec = kvec.get(c.id)
            if vec is None:
                vec = self.embedder.embed([kernel_text(split_problem_name(p.name)[1], tg, c.source)])[0]
            doc = keyword_doc(p.name, split_problem_name(p.name)[1], e.kernel_name, tg, c.source)
            self.index.add_kernel(conn, cand_pk, doc, vec)
        else:
            row = conn.execute(select(CandidateRow.pk, CandidateRow.best_outcome, CandidateRow.best_speedup)
                               .where(CandidateRow.id == c.id)).one()
            cand_pk = row.pk
            # An audit binds: an audited verdict (kevolve.records.Audit: its lower speed, or overturned) replaces
            # the candidate's best, the evaluation it re-measured included; an unaudited one only ranks.
            if ev.audit is not None or (_rank(ev.outcome.value, speedup) > _rank(row.best_outcome, row.best_speedup)
                                        and not _audited(conn, cand_pk)):
                conn.execute(update(CandidateRow).where(CandidateRow.pk == cand_pk).values(**best))
        record = ev.model_dump(mode="json")
        digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
        conn.execute(self._insert(EvaluationRow).values(
            candidate_pk=cand_pk, run_id=e.run_id, outcome=ev.outcome.value, reason=ev.reason, device=ev.device,
            runtime_ms=ev.runtime_ms, ref_runtime_ms=ev.eager_ms,
            compile_ref_runtime_ms=ev.compile_ms, speedup=speedup, speedup_compile=speedup_c,
            max_diff=max_diff(ev), correct=ev.outcome in (Outcome.OK, Outcome.REJECTED), record=record,
            digest=digest, created_at=utcnow()).on_conflict_do_nothing(index_elements=["candidate_pk", "digest"]))
        for parent in c.parent_ids:
            conn.execute(self._insert(LineageRow).values(parent_id=parent, child_id=c.id)
                         .on_conflict_do_nothing(index_elements=["parent_id", "child_id"]))
        return int(added)

    def delete(self, kernel_id: str) -> bool:
        """Remove a kernel, its evaluations, tags and index rows; False when there is no such kernel."""
        with self.engine.connect().execution_options(**WRITE) as conn, conn.begin():
            pk = conn.scalar(select(CandidateRow.pk).where(CandidateRow.id == kernel_id))
            if pk is None:
                return False
            self.index.remove_kernel(conn, pk)
            for table in (EvaluationRow, TagRow):
                conn.execute(delete(table).where(table.candidate_pk == pk))
            conn.execute(delete(CandidateRow).where(CandidateRow.pk == pk))
            _bump(conn)
        return True

    # ---------------------------------------------------------------- reads
    def get(self, kernel_id: str) -> KernelDetail | None:
        """A kernel by id (or unique id prefix of at least 6 characters), with evaluations and lineage."""
        with self._read() as conn:
            return queries.detail(conn, kernel_id)

    def run_best_speedup(self, run_id: str, problem_id: str) -> float | None:
        """The fastest ok kernel a run stored for a problem (its speedup), None if none (winners-only ingest)."""
        with self._read() as conn:
            return queries.run_best_speedup(conn, run_id, problem_id)

    def search(self, query: str, k: int = 10, filters: KernelFilter | None = None) -> list[ArchivedKernel]:
        """Hybrid (embedding + keyword) search; an empty query lists the fastest kernels."""
        f = filters or KernelFilter()
        if not query.strip():
            return self.kernels(f, limit=k)[0]
        with self._read() as conn:
            return hybrid_search(conn, self.embedder, query, k, f, self._rank)

    def _rank(self, conn: Connection, q: np.ndarray, terms: list[str], n: int, f: KernelFilter) -> dict[str, list[int]]:
        return ranked_in_memory(conn, self.index, self.catalog, q, terms, n, f)

    def kernels(self, filters: KernelFilter | None = None, sort: str = "speedup", offset: int = 0,
                limit: int = 50, with_source: bool = False) -> tuple[list[ArchivedKernel], int]:
        """A page of kernels matching filters (sort: speedup, runtime, created) and the total count; their sources
        with `with_source`."""
        with self._read() as conn:
            return queries.kernels(conn, filters or KernelFilter(), sort, offset, limit, with_source)

    def problems(self, offset: int = 0, limit: int = 50) -> tuple[list[ProblemSummary], int]:
        """A page of problems (most kernels first) and the total count."""
        with self._read() as conn:
            return queries.problems(conn, offset, limit)

    def runs(self, limit: int = 200) -> list[RunSummary]:
        """The newest runs that evaluated kernels (to filter by one)."""
        with self._read() as conn:
            return queries.runs(conn, limit)

    def stats(self) -> ArchiveStats:
        """Counts over the whole archive."""
        with self._read() as conn:
            return queries.stats(conn)

    def iter_entries(self, filters: KernelFilter | None = None) -> Iterable[queries.ExportRow]:
        """Every matching kernel with its problem source, best stored evaluation and parents (for export)."""
        with self._read() as conn:
            yield from queries.iter_export(conn, filters or KernelFilter(outcome=None))
