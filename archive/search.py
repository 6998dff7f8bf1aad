"""Hybrid retrieval: reciprocal-rank fusion of three ranked lists.

1. kernel vectors: the query's embedding against each kernel's (op name, techniques, code);
2. problem vectors: the query against each problem's Model code; a similar problem's kernels
   follow it, fastest first — this is what finds "kernels for problems like mine";
3. keywords: BM25 (SQLite FTS5) or ts_rank (PostgreSQL) over names, tags and both sources.

Filters are applied inside every list, so a narrow filter still fills k. The lists come from the
in-memory catalog (``catalog.py``: numpy vectors and filter masks). The same lists computed entirely in
the database (sqlite-vec / SQL subqueries) are the tests' reference (``tests/archive_oracle.py``): they
pass their own ``rank`` to ``hybrid_search``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sqlalchemy import Connection

from kevolve.archive import catalog as cat
from kevolve.archive.embed import Embedder
from kevolve.archive.index import SearchIndex, query_terms
from kevolve.archive.queries import kernels_by_pk
from kevolve.archive.records import ArchivedKernel, KernelFilter
from kevolve.archive.text import condense, expand_query, query_code_text

RRF_K = 60
WEIGHTS = {"kernel": 1.0, "problem": 1.0, "keyword": 1.0}
TOP_PROBLEMS = 20
PER_PROBLEM = 5
MAX_K = 100

# (connection, query vector, query terms, n, filter) -> the ranked lists, by name, of candidate pks
Ranker = Callable[[Connection, np.ndarray, list[str], int, KernelFilter], dict[str, list[int]]]


def query_text(query: str) -> str:
    """Source code is condensed like a stored problem, less its boilerplate; plain words are embedded as they are."""
    looks_like_code = "\n" in query and ("def " in query or "__global__" in query or "class " in query)
    return query_code_text(query) if looks_like_code else condense(query)


def ranked_in_memory(conn: Connection, index: SearchIndex, catalog: cat.Catalog, q: np.ndarray, terms: list[str],
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


def hybrid_search(conn: Connection, embedder: Embedder, query: str, k: int, f: KernelFilter,
                  rank: Ranker) -> list[ArchivedKernel]:
    """The top-k kernels for a free-text or source-code query, best first, with sources and scores;
    `rank` computes the ranked lists (``ranked_in_memory`` over the archive's catalog)."""
    k = max(1, min(k, MAX_K))
    n = max(50, 5 * k)
    if "\n" not in query:  # plain words (code has lines): with the usual names of the operations they name
        query = expand_query(query)
    q = embedder.embed([query_text(query)])[0]
    top = fuse(rank(conn, q, query_terms(query), n, f), k)
    found = kernels_by_pk(conn, [pk for pk, _ in top])
    return [found[pk].model_copy(update={"score": round(s, 6)}) for pk, s in top if pk in found]
