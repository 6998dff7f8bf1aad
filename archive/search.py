"""Hybrid retrieval: reciprocal-rank fusion of three ranked lists.

1. kernel vectors: the query's embedding against each kernel's (op name, techniques, code);
2. problem vectors: the query against each problem's Model code; a similar problem's kernels
   follow it, fastest first — this is what finds "kernels for problems like mine";
3. keywords: BM25 (SQLite FTS5) or ts_rank (PostgreSQL) over names, tags and both sources.

Filters are applied inside every list, so a narrow filter still fills k. Two ways to compute the
lists, with the same results: from the in-memory catalog (``catalog.py``: numpy vectors and filter
masks; what ``Archive.search`` uses), or entirely in the database (sqlite-vec / SQL subqueries: the
reference path, ``catalog=None``).
"""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, text

from kevolve.archive import catalog as cat
from kevolve.archive.embed import Embedder
from kevolve.archive.index import SearchIndex, filter_sql, query_terms
from kevolve.archive.queries import kernels_by_pk
from kevolve.archive.records import ArchivedKernel, KernelFilter
from kevolve.archive.text import condense, query_code_text

RRF_K = 60
WEIGHTS = {"kernel": 1.0, "problem": 1.0, "keyword": 1.0}
TOP_PROBLEMS = 20
PER_PROBLEM = 5
MAX_K = 100


def query_text(query: str) -> str:
    """Source code is condensed like a stored problem, less its boilerplate; plain words are embedded as they are."""
    looks_like_code = "\n" in query and ("def " in query or "__global__" in query or "class " in query)
    return query_code_text(query) if looks_like_code else condense(query)


def _problem_ranked(conn: Connection, problem_pks: list[int], allowed: tuple[str, dict], n: int) -> list[int]:
    """Kernels of the nearest problems: problem by problem, fastest first, at most PER_PROBLEM of each."""
    if not problem_pks:
        return []
    sql = text(f"SELECT pk, problem_pk, s FROM (SELECT c.pk, c.problem_pk, coalesce(c.best_speedup, 0) AS s, "
               f"row_number() OVER (PARTITION BY c.problem_pk ORDER BY c.best_speedup DESC NULLS LAST, c.pk) AS r "
               f"FROM candidates c WHERE c.problem_pk IN :probs AND c.pk IN ({allowed[0]})) ranked "
               f"WHERE r <= :per").bindparams(bindparam("probs", expanding=True))
    rows = conn.execute(sql, {"probs": problem_pks, "per": PER_PROBLEM, **allowed[1]}).all()
    order = {pk: i for i, pk in enumerate(problem_pks)}
    rows.sort(key=lambda r: (order[r[1]], -r[2], r[0]))
    return [r[0] for r in rows[:n]]


def ranked_in_database(conn: Connection, index: SearchIndex, q, terms: list[str], n: int,  # noqa: ANN001
                       f: KernelFilter) -> dict[str, list[int]]:
    """The three lists computed by the database (the reference path)."""
    allowed = filter_sql(f)
    return {
        "kernel": index.knn_kernels(conn, q, n, allowed),
        "problem": _problem_ranked(conn, index.knn_problems(conn, q, TOP_PROBLEMS), allowed, n),
        "keyword": index.keyword(conn, terms, n, allowed),
    }


def ranked_in_memory(conn: Connection, index: SearchIndex, catalog: cat.Catalog, q, terms: list[str],  # noqa: ANN001
                     n: int, f: KernelFilter) -> dict[str, list[int]]:
    """The three lists from the catalog (vectors and filters in numpy; keywords still from the index)."""
    snap = catalog.get(conn)
    allowed = cat.mask(conn, snap, f)
    return {
        "kernel": cat.knn_kernels(snap, q, n, allowed),
        "problem": cat.problem_ranked(snap, cat.knn_problems(snap, q, TOP_PROBLEMS), allowed, n, PER_PROBLEM),
        "keyword": cat.keyword(conn, index, snap, terms, n, allowed, catalog.few_ids),
    }


def fuse(lists: dict[str, list[int]], k: int) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion: (candidate pk, score), best first, ties by pk."""
    score: dict[int, float] = {}
    for name, ranked in lists.items():
        for rank, pk in enumerate(ranked):
            score[pk] = score.get(pk, 0.0) + WEIGHTS[name] / (RRF_K + rank + 1)
    return [(pk, score[pk]) for pk in sorted(score, key=lambda pk: (-score[pk], pk))[:k]]


def hybrid_search(conn: Connection, index: SearchIndex, embedder: Embedder, query: str, k: int,
                  f: KernelFilter, catalog: cat.Catalog | None = None) -> list[ArchivedKernel]:
    """The top-k kernels for a free-text or source-code query, best first, with sources and scores."""
    k = max(1, min(k, MAX_K))
    n = max(50, 5 * k)
    q = embedder.embed([query_text(query)])[0]
    terms = query_terms(query)
    lists = (ranked_in_database(conn, index, q, terms, n, f) if catalog is None
             else ranked_in_memory(conn, index, catalog, q, terms, n, f))
    top = fuse(lists, k)
    found = kernels_by_pk(conn, [pk for pk, _ in top])
    return [found[pk].model_copy(update={"score": round(s, 6)}) for pk, s in top if pk in found]
