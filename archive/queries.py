"""Read queries of the archive: listings, one kernel in full, problems, stats, export rows."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timezone

from sqlalchemy import Connection, Select, bindparam, case, func, select, text
from sqlalchemy.orm import Session

from kevolve.archive.index import filter_sql
from kevolve.archive.models import CandidateRow, EvaluationRow, LineageRow, ProblemRow, RunRow, TagRow
from kevolve.archive.records import (ArchivedKernel, ArchiveStats, EvaluationSummary, KernelDetail, KernelFilter,
                                     LineageEdge, LineageNode, ProblemSummary, RunSummary)
from kevolve.records import Evaluation

SORTS = {
    "speedup": (CandidateRow.best_speedup.desc().nulls_last(), CandidateRow.pk),
    "runtime": (CandidateRow.best_runtime_ms.asc().nulls_last(), CandidateRow.pk),
    "created": (CandidateRow.created_at.desc(), CandidateRow.pk.desc()),
}
MAX_PAGE = 500
MAX_LINEAGE_EDGES = 200


def _orm(conn: Connection) -> Session:
    """An ORM session on the caller's connection (entity rows; no transaction of its own)."""
    return Session(bind=conn, expire_on_commit=False, autoflush=False)


def _select() -> Select:
    return select(CandidateRow, ProblemRow).join(ProblemRow, ProblemRow.pk == CandidateRow.problem_pk)


def _utc(t: datetime) -> datetime:
    """SQLite hands back naive datetimes; they were stored in UTC."""
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def to_kernel(c: CandidateRow, p: ProblemRow, with_source: bool = False, score: float | None = None) -> ArchivedKernel:
    """An ArchivedKernel from a candidate row and its problem row."""
    return ArchivedKernel(
        id=c.id, problem_id=p.id, problem_name=p.name, op_name=p.op_name, level=p.level, task_id=p.task_id,
        kernel_name=c.kernel_name, outcome=c.best_outcome, speedup=c.best_speedup,
        speedup_compile=c.best_speedup_compile, runtime_ms=c.best_runtime_ms, ref_runtime_ms=c.ref_runtime_ms,
        compile_ref_runtime_ms=c.compile_ref_runtime_ms, device=c.device,
        techniques=tuple(t for t in c.techniques.split(",") if t), origin=c.origin, proposer=c.proposer,
        generation=c.generation, created_at=_utc(c.created_at), source=c.source if with_source else None, score=score)


def _filtered(f: KernelFilter) -> Select:
    sub, params = filter_sql(f)
    return _select().where(CandidateRow.pk.in_(text(sub).bindparams(**params)))


def kernels_by_pk(conn: Connection, pks: Sequence[int], with_source: bool = True) -> dict[int, ArchivedKernel]:
    """Kernels for candidate primary keys (any order; missing keys are left out)."""
    if not pks:
        return {}
    rows = _orm(conn).execute(_select().where(CandidateRow.pk.in_(list(pks)))).all()
    return {c.pk: to_kernel(c, p, with_source) for c, p in rows}


def kernels(conn: Connection, f: KernelFilter, sort: str, offset: int, limit: int,
            with_source: bool = False) -> tuple[list[ArchivedKernel], int]:
    """A page of kernels and the total that match (their sources with `with_source`)."""
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
    q = _filtered(f)
    total = conn.scalar(select(func.count()).select_from(q.subquery()))
    rows = _orm(conn).execute(q.order_by(*SORTS[sort]).offset(max(offset, 0)).limit(min(max(limit, 1), MAX_PAGE))).all()
    return [to_kernel(c, p, with_source) for c, p in rows], int(total or 0)


def _resolve(conn: Connection, kernel_id: str) -> int | None:
    pk = conn.scalar(select(CandidateRow.pk).where(CandidateRow.id == kernel_id))
    if pk is None and len(kernel_id) >= 6 and kernel_id.isalnum():
        found = conn.scalars(select(CandidateRow.pk).where(CandidateRow.id.like(f"{kernel_id}%")).limit(2)).all()
        pk = found[0] if len(found) == 1 else None
    return pk


def _lineage(conn: Connection, kernel_id: str) -> list[LineageEdge]:
    """Ancestors and descendants of a kernel (breadth-first, bounded)."""
    edges: dict[tuple[str, str], None] = {}
    for column, other in ((LineageRow.child_id, LineageRow.parent_id), (LineageRow.parent_id, LineageRow.child_id)):
        frontier, seen = {kernel_id}, {kernel_id}
        while frontier and len(edges) < MAX_LINEAGE_EDGES:
            rows = conn.execute(select(LineageRow.parent_id, LineageRow.child_id)
                                .where(column.in_(bindparam("ids", expanding=True))), {"ids": list(frontier)}).all()
            frontier = set()
            for parent, child in rows:
                edges.setdefault((parent, child), None)
                nxt = parent if other is LineageRow.parent_id else child
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.add(nxt)
    return [LineageEdge(parent=p, child=c) for p, c in list(edges)[:MAX_LINEAGE_EDGES]]


def detail(conn: Connection, kernel_id: str) -> KernelDetail | None:
    """One kernel in full, or None."""
    pk = _resolve(conn, kernel_id)
    if pk is None:
        return None
    orm = _orm(conn)
    c, p = orm.execute(_select().where(CandidateRow.pk == pk)).one()
    evs = orm.scalars(select(EvaluationRow).where(EvaluationRow.candidate_pk == pk)
                       .order_by(EvaluationRow.created_at.desc(), EvaluationRow.pk.desc())).all()
    parents = conn.scalars(select(LineageRow.parent_id).where(LineageRow.child_id == c.id)).all()
    summaries = tuple(EvaluationSummary(
        run_id=e.run_id, outcome=e.outcome, reason=e.reason, device=e.device, runtime_ms=e.runtime_ms,
        speedup=e.speedup, speedup_compile=e.speedup_compile, max_diff=e.max_diff, created_at=_utc(e.created_at),
        record=Evaluation.model_validate(e.record)) for e in evs)
    lineage = _lineage(conn, c.id)
    return KernelDetail(kernel=to_kernel(c, p, with_source=True), problem_source=p.source,
                        parent_ids=tuple(parents), evaluations=summaries, lineage=tuple(lineage),
                        lineage_nodes=_lineage_nodes(conn, {x for e in lineage for x in (e.parent, e.child)}))


def _lineage_nodes(conn: Connection, ids: set[str]) -> tuple[LineageNode, ...]:
    """The labels of a lineage's kernels that the archive holds."""
    if not ids:
        return ()
    rows = conn.execute(select(CandidateRow.id, CandidateRow.origin, CandidateRow.best_outcome,
                               CandidateRow.best_speedup).where(CandidateRow.id.in_(bindparam("ids", expanding=True))),
                        {"ids": sorted(ids)}).all()
    return tuple(LineageNode(id=i, origin=o, outcome=out, speedup=sp) for i, o, out, sp in rows)


def problems(conn: Connection, offset: int, limit: int) -> tuple[list[ProblemSummary], int]:
    """A page of problems with kernel counts and best speedups."""
    ok = func.sum(case((CandidateRow.best_outcome == "ok", 1), else_=0))
    q = (select(ProblemRow, func.count(CandidateRow.pk), ok, func.max(CandidateRow.best_speedup))
         .outerjoin(CandidateRow, CandidateRow.problem_pk == ProblemRow.pk).group_by(ProblemRow.pk)
         .order_by(func.count(CandidateRow.pk).desc(), ProblemRow.name, ProblemRow.pk))
    total = conn.scalar(select(func.count()).select_from(ProblemRow))
    rows = _orm(conn).execute(q.offset(max(offset, 0)).limit(min(max(limit, 1), MAX_PAGE))).all()
    return [ProblemSummary(id=p.id, name=p.name, op_name=p.op_name, level=p.level, task_id=p.task_id,
                           kernels=n, ok_kernels=int(n_ok or 0), best_speedup=best)
            for p, n, n_ok, best in rows], int(total or 0)


def stats(conn: Connection) -> ArchiveStats:
    """Counts over the whole archive."""
    count = lambda model: int(conn.scalar(select(func.count()).select_from(model)) or 0)  # noqa: E731
    by_outcome = dict(conn.execute(select(CandidateRow.best_outcome, func.count()).group_by(CandidateRow.best_outcome)).all())
    by_tech = dict(conn.execute(select(TagRow.tag, func.count()).group_by(TagRow.tag).order_by(func.count().desc())).all())
    return ArchiveStats(problems=count(ProblemRow), kernels=count(CandidateRow), ok_kernels=by_outcome.get("ok", 0),
                        evaluations=count(EvaluationRow), runs=count(RunRow), by_outcome=by_outcome,
                        by_technique=by_tech, best_speedup=conn.scalar(select(func.max(CandidateRow.best_speedup))))


def runs(conn: Connection, limit: int) -> list[RunSummary]:
    """The newest runs that evaluated kernels, with how many kernels each evaluated."""
    n = func.count(func.distinct(EvaluationRow.candidate_pk))
    q = (select(RunRow.id, RunRow.kind, RunRow.created_at, n).join(EvaluationRow, EvaluationRow.run_id == RunRow.id)
         .group_by(RunRow.id, RunRow.kind, RunRow.created_at).order_by(RunRow.created_at.desc(), RunRow.id)
         .limit(min(max(limit, 1), MAX_PAGE)))
    return [RunSummary(id=i, kind=k or "", created_at=_utc(t), kernels=int(c)) for i, k, t, c in conn.execute(q)]


def run_best_speedup(conn: Connection, run_id: str, problem_id: str) -> float | None:
    """The best speedup among ok evaluations a run stored for a problem (0 for an ok one without timing);
    None when the run stored no ok kernel of it."""
    best = func.max(func.coalesce(EvaluationRow.speedup, 0.0))
    q = (select(best).select_from(EvaluationRow).join(CandidateRow, CandidateRow.pk == EvaluationRow.candidate_pk)
         .join(ProblemRow, ProblemRow.pk == CandidateRow.problem_pk)
         .where(EvaluationRow.run_id == run_id, EvaluationRow.outcome == "ok", ProblemRow.id == problem_id))
    found = conn.scalar(q)
    return None if found is None else float(found)


ExportRow = tuple[ArchivedKernel, str, Evaluation | None, tuple[str, ...]]


def iter_export(conn: Connection, f: KernelFilter, batch: int = 500) -> Iterator[ExportRow]:
    """(kernel with source, problem source, best evaluation, parent ids) per matching kernel, in pk order."""
    last, orm = 0, _orm(conn)
    while True:
        rows = orm.execute(_filtered(f).where(CandidateRow.pk > last).order_by(CandidateRow.pk).limit(batch)).all()
        if not rows:
            return
        for c, p in rows:
            evs = orm.scalars(select(EvaluationRow).where(EvaluationRow.candidate_pk == c.pk)).all()
            best = max(evs, key=lambda e: ((e.outcome == "ok"), e.speedup or 0.0, e.pk), default=None)
            parents = tuple(conn.scalars(select(LineageRow.parent_id).where(LineageRow.child_id == c.id)))
            yield (to_kernel(c, p, with_source=True), p.source,
                   None if best is None else Evaluation.model_validate(best.record), parents)
            last = c.pk
