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
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0003"
        tables = {r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type='table'"))}
    assert {"problems", "candidates", "evaluations", "lineage", "kernel_tags", "runs", "kernel_fts"} <= tables


def test_an_archive_from_before_generations_were_kept_opens_with_none(tmp_path: Path) -> None:
    """0003 adds candidates.generation: kernels stored before it read back with no generation, and new ones keep
    theirs. The kernel is written by the archive itself, the schema then taken back to 0002 (the column dropped) and
    forward again, as an older kevolve's archive is opened by this one."""
    from alembic import command
    from alembic.config import Config

    from kevolve.archive.db import MIGRATIONS
    from kevolve.archive.embed import HashingEmbedder
    from kevolve.archive.records import Entry, KernelFilter
    from kevolve.archive.store import Archive
    from kevolve.archive.synthetic import entries

    url = f"sqlite:///{tmp_path / 'm.db'}"
    first, second = list(entries(2, n_problems=1, seed=3))
    arch = Archive(url, embedder=HashingEmbedder())
    arch.put_many([Entry(**{**dict(first), "candidate": first.candidate.model_copy(update={"generation": 4})})])
    arch.close()
    engine = make_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.connect() as conn, conn.begin():
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0002")
        cols = {r[1] for r in conn.execute(text("PRAGMA table_info(candidates)"))}
    assert "generation" not in cols
    engine.dispose()
    arch = Archive(url, embedder=HashingEmbedder())  # opening upgrades to the head
    try:
        arch.put_many([Entry(**{**dict(second), "candidate": second.candidate.model_copy(update={"generation": 2})})])
        got = {k.id: k.generation for k in arch.kernels(KernelFilter(outcome=None), limit=10)[0]}
    finally:
        arch.close()
    assert got == {first.candidate.id: None, second.candidate.id: 2}
