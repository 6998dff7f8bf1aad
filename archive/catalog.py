"""The in-memory search catalog: every kernel's and problem's vector and filterable columns, in numpy.

Hybrid search spends its time in two places a database is slow at for ten thousand rows: a vector scan
per ranked list, and re-evaluating the filter (a subquery over candidates) inside each list. The catalog
holds both in memory — 10,000 × 384 float32 is 15 MB and one matrix-vector product (≈ 1 ms) — and
evaluates filters as boolean masks. It is loaded in one read transaction and reloaded when the
archive's ``archive_state.generation`` (bumped by every write, from any process) or its newest rows
change, so it never serves a stale ranking. Results equal the database path's (the tests' reference,
``tests/archive_oracle.py``); a test compares the two.

Filter semantics follow ``index.filter_sql`` exactly: equality filters (level, outcome, technique,
problem id, minimum speedup) become numpy comparisons; the substring filters (op, device) still run
their ``LIKE`` in the database, over the few distinct names, so case and wildcard rules stay the SQL ones.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, text

from kevolve.archive.index import SearchIndex, filter_sql
from kevolve.archive.records import KernelFilter

_NULL = np.nan
FEW = 2000  # allowed kernels up to which keyword search takes them as an id list


@dataclass(frozen=True)
class Snapshot:
    """One consistent copy of the archive's searchable columns. Kernel arrays are in ``k_pk`` order."""

    version: tuple
    k_pk: np.ndarray  # int64, ascending (candidates.pk)
    k_problem: np.ndarray  # int64 problems.pk of each kernel
    k_speedup: np.ndarray  # float64 best speedup, NaN for NULL
    k_level: np.ndarray  # float64 level of the kernel's problem, NaN for NULL
    k_outcome: np.ndarray  # object: best outcome
    k_vec: np.ndarray  # float32 (n, dim), rows scaled to unit length (cosine = dot)
    k_has_vec: np.ndarray  # bool: the kernel has a vector row
    tags: dict[str, np.ndarray]  # technique -> bool mask
    p_pk: np.ndarray  # int64, problems with a vector
    p_vec: np.ndarray  # float32 (m, dim), unit rows
    problem_pk_by_id: dict[str, int]
    by_problem: dict[int, np.ndarray]  # problem pk -> kernel rows, fastest first (NULL last), then pk

    def rows(self, pks: np.ndarray) -> np.ndarray:
        """Kernel row indices of candidate pks (all present)."""
        return np.searchsorted(self.k_pk, pks)


def _unit(vecs: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return np.divide(vecs, norms, out=np.zeros_like(vecs), where=norms > 0)


def version(conn: Connection) -> tuple:
    """What changes whenever the archive does: the write generation and the newest row ids."""
    return tuple(conn.execute(text(
        "SELECT (SELECT generation FROM archive_state WHERE id = 1), (SELECT max(pk) FROM candidates), "
        "(SELECT max(pk) FROM evaluations), (SELECT max(pk) FROM problems)")).one())


def load(conn: Connection, index: SearchIndex, ver: tuple) -> Snapshot:
    """Read everything the catalog holds (call inside one read transaction)."""
    kernels = conn.execute(text("SELECT c.pk, c.problem_pk, c.best_speedup, c.best_outcome, p.level "
                                "FROM candidates c JOIN problems p ON p.pk = c.problem_pk ORDER BY c.pk")).all()
    k_pk = np.array([r[0] for r in kernels], dtype=np.int64)
    k_problem = np.array([r[1] for r in kernels], dtype=np.int64)
    k_speedup = np.array([_NULL if r[2] is None else r[2] for r in kernels], dtype=np.float64)
    k_level = np.array([_NULL if r[4] is None else r[4] for r in kernels], dtype=np.float64)
    k_outcome = np.array([r[3] for r in kernels], dtype=object)
    vpk, vecs = index.vectors(conn, "kernels")
    keep = np.isin(vpk, k_pk)
    k_vec = np.zeros((len(k_pk), vecs.shape[1] if len(vecs) else 384), dtype=np.float32)
    k_has_vec = np.zeros(len(k_pk), dtype=bool)
    rows = np.searchsorted(k_pk, vpk[keep])
    k_vec[rows], k_has_vec[rows] = _unit(vecs[keep]), True
    tags: dict[str, np.ndarray] = {}
    for pk, tag in conn.execute(text("SELECT candidate_pk, tag FROM kernel_tags")):
        i = int(np.searchsorted(k_pk, pk))
        if i < len(k_pk) and k_pk[i] == pk:
            tags.setdefault(tag, np.zeros(len(k_pk), dtype=bool))[i] = True
    p_pk, p_vec = index.vectors(conn, "problems")
    ids = dict(conn.execute(text("SELECT id, pk FROM problems")).all())
    # fastest first, NULL speedups last, then pk: the database path's window order
    order = np.lexsort((k_pk, -np.nan_to_num(k_speedup, nan=0.0), np.isnan(k_speedup), k_problem))
    bounds = np.flatnonzero(np.diff(k_problem[order])) + 1
    by_problem = {int(k_problem[g[0]]): g for g in np.split(order, bounds) if len(g)}
    return Snapshot(version=ver, k_pk=k_pk, k_problem=k_problem, k_speedup=k_speedup, k_level=k_level,
                    k_outcome=k_outcome, k_vec=k_vec, k_has_vec=k_has_vec, tags=tags, p_pk=p_pk,
                    p_vec=_unit(p_vec), problem_pk_by_id=ids, by_problem=by_problem)


class Catalog:
    """The current Snapshot of one archive, reloaded when the archive changed (thread-safe)."""

    def __init__(self, index: SearchIndex, few_ids: int = FEW) -> None:
        self.index = index
        self.few_ids = few_ids  # keyword search takes the allowed kernels as an id list up to this many
        self._lock = threading.Lock()
        self._snap: Snapshot | None = None
        self.loads = 0

    def get(self, conn: Connection) -> Snapshot:
        ver = version(conn)
        snap = self._snap
        if snap is not None and snap.version == ver:
            return snap
        with self._lock:
            if self._snap is None or self._snap.version != ver:
                self._snap = load(conn, self.index, ver)
                self.loads += 1
            return self._snap


def mask(conn: Connection, s: Snapshot, f: KernelFilter) -> np.ndarray:
    """Kernels that pass the filter, as ``filter_sql`` would select them."""
    sql_f = f.model_copy(update={k: v.replace("\x00", "") for k, v in f.model_dump().items() if isinstance(v, str)})
    ok = np.ones(len(s.k_pk), dtype=bool)
    if sql_f.level is not None:
        ok &= s.k_level == sql_f.level
    if sql_f.min_speedup is not None:
        ok &= s.k_speedup >= sql_f.min_speedup  # NaN (NULL) compares false, as in SQL
    if sql_f.technique:
        ok &= s.tags.get(sql_f.technique.lower(), np.zeros(len(s.k_pk), dtype=bool))
    if sql_f.outcome:
        ok &= s.k_outcome == sql_f.outcome.lower()
    if sql_f.problem_id:
        ok &= s.k_problem == s.problem_pk_by_id.get(sql_f.problem_id, -1)
    if sql_f.op or sql_f.device or sql_f.run_id:
        # LIKE and the run's evaluations stay in SQL: the same subquery the database path uses, restricted to them
        sub, params = filter_sql(KernelFilter(outcome=None, op=sql_f.op, device=sql_f.device, run_id=sql_f.run_id))
        pks = np.fromiter((r[0] for r in conn.execute(text(sub), params)), dtype=np.int64)
        ok &= np.isin(s.k_pk, pks)
    return ok


def _best(pks: np.ndarray, scores: np.ndarray, n: int) -> list[int]:
    """The n highest scores' pks, best first; ties by pk."""
    if n <= 0 or len(pks) == 0:
        return []
    if len(pks) > n:
        cut = np.argpartition(-scores, n - 1)[:n]
        # keep every row tied with the n-th score, so the pk tie-break is exact
        edge = scores[cut].min()
        cut = np.flatnonzero(scores >= edge)
        pks, scores = pks[cut], scores[cut]
    order = np.lexsort((pks, -scores))[:n]
    return [int(x) for x in pks[order]]


def _scores(vecs: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Cosine of each (unit) row with q. numpy's own loop, one thread: a BLAS gemv this size runs on every
    core, and on a busy 2-core machine its spinning threads cost 3-4x the CPU of one thread."""
    return np.einsum("ij,j->i", vecs, _unit(q[None, :].astype(np.float32))[0])


def knn_kernels(s: Snapshot, q: np.ndarray, n: int, allowed: np.ndarray) -> list[int]:
    """The n allowed kernels nearest to q (cosine)."""
    scores = _scores(s.k_vec, q)  # every row (one pass over the matrix), then keep the allowed ones
    rows = np.flatnonzero(allowed & s.k_has_vec)
    return _best(s.k_pk[rows], scores[rows], n)


def knn_problems(s: Snapshot, q: np.ndarray, n: int) -> list[int]:
    """The n problems nearest to q (cosine)."""
    return _best(s.p_pk, _scores(s.p_vec, q), n)


def problem_ranked(s: Snapshot, problem_pks: list[int], allowed: np.ndarray, n: int, per: int) -> list[int]:
    """Kernels of the nearest problems: problem by problem, fastest first, at most ``per`` of each."""
    out: list[int] = []
    for p in problem_pks:
        rows = s.by_problem.get(p)
        if rows is None:
            continue
        picked = rows[allowed[rows]][:per]
        # the database path orders a problem's picks by coalesce(speedup, 0) desc, then pk
        sp = np.nan_to_num(s.k_speedup[picked], nan=0.0)
        out.extend(int(x) for x in s.k_pk[picked][np.lexsort((s.k_pk[picked], -sp))])
        if len(out) >= n:
            break
    return out[:n]


def keyword(conn: Connection, index: SearchIndex, s: Snapshot, terms: list[str], n: int,
            allowed: np.ndarray, few: int = FEW) -> list[int]:
    """The first n allowed keyword matches in rank order. A narrow filter hands its few kernel ids to the
    full-text query; a broad one reads unfiltered matches until n pass (cheaper than a long id list)."""
    count = int(allowed.sum())
    if not terms or count == 0:
        return []
    if count <= few:
        return index.keyword_among(conn, terms, n, [int(x) for x in s.k_pk[allowed]])
    share = count / len(allowed)
    limit = min(len(s.k_pk), max(n, int(n / share * 1.2) + 16))
    while True:
        found = np.array(index.keyword_unfiltered(conn, terms, limit), dtype=np.int64)
        known = found[np.isin(found, s.k_pk)]
        keep = known[allowed[s.rows(known)]]
        if len(keep) >= n or len(found) < limit or limit >= len(s.k_pk):
            return [int(x) for x in keep[:n]]
        limit *= 4
