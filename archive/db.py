"""Engines and schema upgrades for the archive: SQLite by default, PostgreSQL by URL.

SQLite runs in WAL mode with a long busy timeout, and every write transaction starts with
``BEGIN IMMEDIATE`` so that several writers (batch workers) queue for the lock instead of failing
with "database is locked" on a read→write upgrade. sqlite-vec is loaded into every connection;
the pyenv Pythons lack ``enable_load_extension``, so ``pysqlite3`` (a bundled, newer SQLite) is
used when installed.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
WRITE = {"kevolve_write": True}


class ArchiveError(RuntimeError):
    """Bad configuration or an unreachable database: a one-line message for the user."""


def default_url(env: dict[str, str] | None = None) -> str:
    """``sqlite:///$KEVOLVE_HOME/archive.db`` (KEVOLVE_HOME defaults to ~/.kevolve). Entry points only."""
    env = dict(os.environ) if env is None else env
    if url := env.get("KEVOLVE_DB"):
        return url
    home = Path(env.get("KEVOLVE_HOME") or Path.home() / ".kevolve").expanduser()
    return f"sqlite:///{home / 'archive.db'}"


def _sqlite_module():  # noqa: ANN202
    try:
        import pysqlite3.dbapi2 as mod  # noqa: PLC0415
    except ImportError:
        import sqlite3 as mod  # noqa: PLC0415
    if not hasattr(mod.Connection, "enable_load_extension"):
        raise ArchiveError("this Python's sqlite3 cannot load extensions: pip install pysqlite3-binary")
    return mod


def _sqlite_engine(url: str) -> Engine:
    u = make_url(url)
    if u.database and u.database != ":memory:":
        try:
            Path(u.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ArchiveError(f"cannot create the folder of {u.database}: {e.strerror}") from None
    engine = create_engine(url, module=_sqlite_module(), connect_args={"timeout": 60, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # noqa: ANN001
        import sqlite_vec  # noqa: PLC0415

        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see _on_begin)
        dbapi_conn.enable_load_extension(True)
        sqlite_vec.load(dbapi_conn)
        dbapi_conn.enable_load_extension(False)
        cur = dbapi_conn.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "busy_timeout=60000"):
            cur.execute(f"PRAGMA {pragma}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # noqa: ANN001
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("kevolve_write") else "BEGIN")

    return engine


def make_engine(url: str) -> Engine:
    """An engine for ``url``; raises ArchiveError for a malformed URL or an unsupported backend."""
    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError:
        raise ArchiveError(f"not a database URL: {url!r} (try sqlite:///path.db or postgresql+psycopg://…)") from None
    if backend == "sqlite":
        return _sqlite_engine(url)
    if backend == "postgresql":
        try:
            return create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 10})
        except ImportError as e:
            raise ArchiveError(f"cannot use {url!r}: the driver {e.name or 'psycopg'!r} is not installed: "
                               "pip install 'kevolve[archive]'") from None
        except ArgumentError as e:
            raise ArchiveError(f"cannot use {url!r}: {e}") from None
    raise ArchiveError(f"unsupported database {backend!r}: use sqlite:///… or postgresql+psycopg://…")


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest migration (idempotent; safe when several processes race)."""
    from alembic import command  # noqa: PLC0415
    from alembic.config import Config  # noqa: PLC0415

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    try:
        with engine.connect().execution_options(**WRITE) as conn, conn.begin():
            if engine.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(7061727)"))  # one migrator at a time
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    except SQLAlchemyError as e:
        raise ArchiveError(f"cannot open the archive at {engine.url.render_as_string(hide_password=True)}: "
                           f"{_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    msg = str(getattr(e, "orig", None) or e).strip().splitlines()
    return msg[0] if msg else type(e).__name__
