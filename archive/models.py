"""SQLAlchemy 2 models of the archive: problems, runs, candidates (kernels), evaluations, lineage.

The schema itself is created by the Alembic migrations in ``archive/migrations``; these models are
what the code reads and writes. Search indexes (FTS5 + sqlite-vec tables on SQLite, a tsvector and
an embedding array on PostgreSQL) are backend-specific and live in ``archive/index.py``.

A candidate row carries a denormalised copy of its *best* evaluation (``best_*`` columns) so that
listing, filtering and search read one table; the full evaluations stay in ``evaluations``.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    """Declarative base of every archive table."""


class ProblemRow(Base):
    """A problem (KernelBench format): the reference PyTorch module a kernel replaces."""

    __tablename__ = "problems"
    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True, comment="content hash of the source")
    name: Mapped[str] = mapped_column(String(256), comment="file stem, e.g. '19_ReLU'")
    op_name: Mapped[str] = mapped_column(String(256), index=True, comment="name without the task number")
    level: Mapped[int | None] = mapped_column(Integer, index=True)
    task_id: Mapped[int | None] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(Text)
    path: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RunRow(Base):
    """One optimize / bench / import run that put kernels in the archive."""

    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), default="", comment="optimize, bench, import")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    meta: Mapped[dict] = mapped_column(JSON, default=dict)


class CandidateRow(Base):
    """A candidate kernel (a Python source defining ModelNew) and its best verdict so far."""

    __tablename__ = "candidates"
    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True, comment="content hash of the source")
    problem_pk: Mapped[int] = mapped_column(ForeignKey("problems.pk", ondelete="CASCADE"), index=True)
    kernel_name: Mapped[str] = mapped_column(String(256), default="")
    source: Mapped[str] = mapped_column(Text)
    origin: Mapped[str] = mapped_column(String(32), default="imported")
    proposer: Mapped[str] = mapped_column(String(256), default="user")
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    generation: Mapped[int | None] = mapped_column(Integer, nullable=True,
                                                   comment="the optimize generation that proposed it; NULL elsewhere")
    techniques: Mapped[str] = mapped_column(Text, default="", comment="comma-separated technique tags")
    best_outcome: Mapped[str] = mapped_column(String(32), index=True)
    best_speedup: Mapped[float | None] = mapped_column(Float, index=True)
    best_speedup_compile: Mapped[float | None] = mapped_column(Float)
    best_runtime_ms: Mapped[float | None] = mapped_column(Float)
    ref_runtime_ms: Mapped[float | None] = mapped_column(Float)
    compile_ref_runtime_ms: Mapped[float | None] = mapped_column(Float)
    device: Mapped[str] = mapped_column(String(256), default="", index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TagRow(Base):
    """One technique tag of a candidate (for exact filtering)."""

    __tablename__ = "kernel_tags"
    candidate_pk: Mapped[int] = mapped_column(ForeignKey("candidates.pk", ondelete="CASCADE"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(64), primary_key=True, index=True)


class LineageRow(Base):
    """parent → child; the parent may not be in the archive (it was never evaluated ok, say)."""

    __tablename__ = "lineage"
    parent_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    child_id: Mapped[str] = mapped_column(String(64), primary_key=True, index=True)


class EvaluationRow(Base):
    """One sandbox verdict on a candidate; ``record`` is the full Evaluation (model_dump)."""

    __tablename__ = "evaluations"
    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    candidate_pk: Mapped[int] = mapped_column(ForeignKey("candidates.pk", ondelete="CASCADE"), index=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), index=True)
    outcome: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text, default="")
    device: Mapped[str] = mapped_column(String(256), default="")
    runtime_ms: Mapped[float | None] = mapped_column(Float)
    ref_runtime_ms: Mapped[float | None] = mapped_column(Float)
    compile_ref_runtime_ms: Mapped[float | None] = mapped_column(Float)
    speedup: Mapped[float | None] = mapped_column(Float)
    speedup_compile: Mapped[float | None] = mapped_column(Float)
    max_diff: Mapped[float | None] = mapped_column(Float)
    correct: Mapped[bool] = mapped_column(Boolean, default=False)
    record: Mapped[dict] = mapped_column(JSON, default=dict)
    digest: Mapped[str] = mapped_column(String(64), comment="sha256 of record: the same verdict is stored once")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (UniqueConstraint("candidate_pk", "digest", name="uq_evaluations_candidate_digest"),)


class ArchiveStateRow(Base):
    """One row: a number every write transaction increments, so a process caching search data (the
    in-memory catalog) can tell with one read whether anything changed, whoever wrote it."""

    __tablename__ = "archive_state"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    generation: Mapped[int] = mapped_column(Integer)


Index("ix_candidates_problem_speedup", CandidateRow.problem_pk, CandidateRow.best_speedup)
