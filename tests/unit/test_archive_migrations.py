"""The Alembic migrations build exactly the schema the SQLAlchemy models describe, and re-running them is a no-op."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from kevolve.archive.db import make_engine, upgrade
from kevolve.archive.models import Base

SEARCH_TABLES = {"kernel_fts", "kernel_vec", "problem_vec", "kernel_search", "problem_search", "alembic_version"}


def _search_table(name: str) -> bool:
    return any(name == t or name.startswith(t + "_") for t in SEARCH_TABLES)


def test_migrated_schema_matches_the_models(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'm.db'}")
    upgrade(engine)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={
            "include_object": lambda obj, name, type_, reflected, compare_to: not (type_ == "table" and _search_table(name)),
            "compare_type": True})
        diff = compare_metadata(ctx, Base.metadata)
    assert diff == []


def test_upgrade_twice_is_a_no_op(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'm.db'}")
    upgrade(engine)
    upgrade(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0002"
        tables = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type='table'"))}
    assert {"problems", "candidates", "evaluations", "lineage", "kernel_tags", "runs", "kernel_fts"} <= tables
