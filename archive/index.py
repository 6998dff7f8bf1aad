"""Keyword and vector indexes behind hybrid search, one implementation per backend.

SQLite: FTS5 (``kernel_fts``, porter stemming, BM25) and sqlite-vec (``kernel_vec``,
``problem_vec``, cosine); the row ids are ``candidates.pk`` / ``problems.pk``.
PostgreSQL: a ``tsvector`` with a GIN index, and embeddings as ``real[]`` (Debian's PostgreSQL ships
no pgvector). Vectors are ranked in memory (``catalog.py``), so the index stores them and hands them
over; keywords are ranked here, by the database's full text.

``filter_sql`` is a filter as a SQL subquery selecting ``candidates.pk``, shared by listing
(``queries.py``), the catalog's substring filters and the tests' database-side reference ranking.
"""
from __future__ import annotations

import json
import re
from typing import Protocol

import numpy as np
from sqlalchemy import Connection, text

from kevolve.archive.records import KernelFilter

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{2,}")
# Words every KernelBench problem and solution contains: they carry no signal for a keyword query.
_BOILER = frozenset(
    "import torch self def return class model modelnew forward init super none nn module the and for "
    "get_inputs get_init_inputs inputs input tensor size dim with from int float const void include".split()
)
MAX_TERMS = 16


def query_terms(query: str) -> list[str]:
    """Distinct informative words of a free-text or source-code query, first MAX_TERMS of them."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(query.replace("_", " ")):
        w = w.lower()
        if w not in _BOILER:
            seen.setdefault(w, None)
    return list(seen)[:MAX_TERMS]


def filter_sql(f: KernelFilter) -> tuple[str, dict[str, object]]:
    """A ``SELECT c.pk …`` subquery for the filter and its bound parameters (both backends)."""
    f = f.model_copy(update={k: v.replace("\x00", "") for k, v in f.model_dump().items() if isinstance(v, str)})
    where, params = ["1=1"], {}
    if f.level is not None:
        where.append("p.level = :f_level")
        params["f_level"] = f.level
    if f.op:
        where.append("lower(p.op_name) LIKE :f_op")
        params["f_op"] = f"%{f.op.lower()}%"
    if f.device:
        where.append("lower(c.device) LIKE :f_device")
        params["f_device"] = f"%{f.device.lower()}%"
    if f.min_speedup is not None:
        where.append("c.best_speedup >= :f_min_speedup")
        params["f_min_speedup"] = f.min_speedup
    if f.technique:
        where.append("EXISTS (SELECT 1 FROM kernel_tags t WHERE t.candidate_pk = c.pk AND t.tag = :f_tech)")
        params["f_tech"] = f.technique.lower()
    if f.outcome:
        where.append("c.best_outcome = :f_outcome")
        params["f_outcome"] = f.outcome.lower()
    if f.problem_id:
        where.append("p.id = :f_problem")
        params["f_problem"] = f.problem_id
    if f.run_id:
        where.append("EXISTS (SELECT 1 FROM evaluations e WHERE e.candidate_pk = c.pk AND e.run_id = :f_run)")
        params["f_run"] = f.run_id
    # Join problems only when a problem column is filtered: the join costs more than the filter itself.
    join = " JOIN problems p ON p.pk = c.problem_pk" if any(w.startswith(("p.", "lower(p.")) for w in where) else ""
    sql = f"SELECT c.pk FROM candidates c{join} WHERE " + " AND ".join(where)
    return sql, params


class SearchIndex(Protocol):
    """What hybrid search needs from a backend."""

    def add_problem(self, conn: Connection, problem_pk: int, vec: np.ndarray) -> None: ...
    def add_kernel(self, conn: Connection, cand_pk: int, doc: str, vec: np.ndarray) -> None: ...
    def remove_kernel(self, conn: Connection, cand_pk: int) -> None: ...
    def keyword_unfiltered(self, conn: Connection, terms: list[str], limit: int) -> list[int]: ...
    def keyword_among(self, conn: Connection, terms: list[str], n: int, pks: list[int]) -> list[int]: ...
    def vectors(self, conn: Connection, of: str) -> tuple[np.ndarray, np.ndarray]: ...


def _blob(vec: np.ndarray) -> bytes:
    return np.ascontiguousarray(vec, dtype=np.float32).tobytes()


class SqliteIndex:
    """FTS5 + sqlite-vec."""

    def add_problem(self, conn: Connection, problem_pk: int, vec: np.ndarray) -> None:
        conn.execute(text("INSERT INTO problem_vec(rowid, embedding) VALUES (:pk, :v)"), {"pk": problem_pk, "v": _blob(vec)})

    def add_kernel(self, conn: Connection, cand_pk: int, doc: str, vec: np.ndarray) -> None:
        conn.execute(text("INSERT INTO kernel_fts(rowid, doc) VALUES (:pk, :doc)"), {"pk": cand_pk, "doc": doc})
        conn.execute(text("INSERT INTO kernel_vec(rowid, embedding) VALUES (:pk, :v)"), {"pk": cand_pk, "v": _blob(vec)})

    def remove_kernel(self, conn: Connection, cand_pk: int) -> None:
        for table in ("kernel_fts", "kernel_vec"):
            conn.execute(text(f"DELETE FROM {table} WHERE rowid = :pk"), {"pk": cand_pk})

    def keyword_unfiltered(self, conn: Connection, terms: list[str], limit: int) -> list[int]:
        if not terms:
            return []
        sql = "SELECT rowid FROM kernel_fts WHERE kernel_fts MATCH :m ORDER BY bm25(kernel_fts), rowid LIMIT :n"
        return [r[0] for r in conn.execute(text(sql), {"m": " OR ".join(f'"{t}"' for t in terms), "n": limit})]

    def keyword_among(self, conn: Connection, terms: list[str], n: int, pks: list[int]) -> list[int]:
        if not terms or not pks:
            return []
        sql = ("SELECT rowid FROM kernel_fts WHERE kernel_fts MATCH :m "
               "AND +rowid IN (SELECT value FROM json_each(:ids)) ORDER BY bm25(kernel_fts), rowid LIMIT :n")
        params = {"m": " OR ".join(f'"{t}"' for t in terms), "ids": json.dumps(pks), "n": n}
        return [r[0] for r in conn.execute(text(sql), params)]

    def vectors(self, conn: Connection, of: str) -> tuple[np.ndarray, np.ndarray]:
        table = {"kernels": "kernel_vec", "problems": "problem_vec"}[of]
        rows = conn.execute(text(f"SELECT rowid, embedding FROM {table} ORDER BY rowid")).all()
        return _stack(rows)


def _stack(rows: list) -> tuple[np.ndarray, np.ndarray]:
    """(pk, embedding) rows — float32 blobs or float lists — as a pk array and an (n, dim) matrix."""
    pks = np.array([r[0] for r in rows], dtype=np.int64)
    if not rows:
        return pks, np.zeros((0, 384), dtype=np.float32)
    first = rows[0][1]
    if isinstance(first, bytes | bytearray | memoryview):
        vecs = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.float32).reshape(len(rows), -1)
    else:
        vecs = np.array([r[1] for r in rows], dtype=np.float32)
    return pks, vecs


class PostgresIndex:
    """tsvector full text + numpy cosine over ``real[]`` embeddings."""

    def add_problem(self, conn: Connection, problem_pk: int, vec: np.ndarray) -> None:
        conn.execute(text("INSERT INTO problem_search(problem_pk, embedding) VALUES (:pk, :v)"),
                     {"pk": problem_pk, "v": [float(x) for x in vec]})

    def add_kernel(self, conn: Connection, cand_pk: int, doc: str, vec: np.ndarray) -> None:
        conn.execute(text("INSERT INTO kernel_search(candidate_pk, tsv, embedding) "
                          "VALUES (:pk, to_tsvector('english', :doc), :v)"),
                     {"pk": cand_pk, "doc": doc.replace("\x00", ""), "v": [float(x) for x in vec]})

    def remove_kernel(self, conn: Connection, cand_pk: int) -> None:
        conn.execute(text("DELETE FROM kernel_search WHERE candidate_pk = :pk"), {"pk": cand_pk})

    def keyword_unfiltered(self, conn: Connection, terms: list[str], limit: int) -> list[int]:
        if not terms:
            return []
        sql = ("SELECT s.candidate_pk FROM kernel_search s, to_tsquery('english', :m) q WHERE s.tsv @@ q "
               "ORDER BY ts_rank(s.tsv, q) DESC, s.candidate_pk LIMIT :n")
        return [r[0] for r in conn.execute(text(sql), {"m": " | ".join(terms), "n": limit})]

    def keyword_among(self, conn: Connection, terms: list[str], n: int, pks: list[int]) -> list[int]:
        if not terms or not pks:
            return []
        sql = ("SELECT s.candidate_pk FROM kernel_search s, to_tsquery('english', :m) q "
               "WHERE s.tsv @@ q AND s.candidate_pk = ANY(:ids) "
               "ORDER BY ts_rank(s.tsv, q) DESC, s.candidate_pk LIMIT :n")
        return [r[0] for r in conn.execute(text(sql), {"m": " | ".join(terms), "ids": pks, "n": n})]

    def vectors(self, conn: Connection, of: str) -> tuple[np.ndarray, np.ndarray]:
        table, key = {"kernels": ("kernel_search", "candidate_pk"), "problems": ("problem_search", "problem_pk")}[of]
        return _stack(conn.execute(text(f"SELECT {key}, embedding FROM {table} ORDER BY {key}")).all())


def index_for(dialect: str) -> SearchIndex:
    """The index implementation for a SQLAlchemy dialect name."""
    return SqliteIndex() if dialect == "sqlite" else PostgresIndex()
