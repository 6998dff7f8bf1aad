"""The in-memory search path (catalog: numpy vectors and filter masks) returns exactly what the database
path (sqlite-vec KNN, SQL filter subqueries; tests/archive_oracle.py) returns, for every filter, and never a
stale result."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from archive_oracle import database_search

from kevolve.archive.records import KernelFilter
from kevolve.archive.store import Archive, Entry
from kevolve.archive.synthetic import OPS, entries, problem_source
from kevolve.records import Candidate


class RandomEmbedder:
    """A fixed random unit vector per text: no two texts tie, so both paths must agree rank for rank."""

    name, dim = "random-384", 384

    def embed(self, texts):  # noqa: ANN001, ANN201
        out = np.array([np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:15], 16))
                        .standard_normal(self.dim) for t in texts], dtype=np.float32).reshape(len(texts), self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True) if len(texts) else out


def distinct(made: list[Entry]) -> list[Entry]:
    """The synthetic kernels with a line that makes each embedded text unique (their CUDA code sits in a
    string, which the embedded text leaves out): equal vectors would tie, and ties may come in any order."""
    out = []
    for i, e in enumerate(made):
        c = Candidate.from_source(e.candidate.source + f"\nKERNEL_{i} = {i}\n", e.problem.id,
                                  parent_ids=e.candidate.parent_ids)
        out.append(e.model_copy(update={"candidate": c,
                                        "evaluation": e.evaluation.model_copy(update={"candidate_id": c.id})}))
    return out


QUERIES = ["warp shuffle reduction", "shared memory tiled matmul", "fused bias relu epilogue", "nothing matches zzqx",
           problem_source("Softmax", OPS["Softmax"]), problem_source("Conv2d", OPS["Conv2d"])]
FILTERS = [KernelFilter(), KernelFilter(outcome=None), KernelFilter(level=2), KernelFilter(technique="atomics"),
           KernelFilter(level=3, technique="tiling"), KernelFilter(min_speedup=2.0), KernelFilter(op="relu"),
           KernelFilter(op="Matmul_", outcome=None), KernelFilter(device="h100"), KernelFilter(device="a100%40"),
           KernelFilter(outcome="incorrect"), KernelFilter(technique="no_such_tag"),
           KernelFilter(run_id="synthetic-9", level=2), KernelFilter(run_id="no-such-run", outcome=None)]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Archive:
    url = f"sqlite:///{tmp_path_factory.mktemp('paths') / 'a.db'}"
    fast = Archive(url, embedder=RandomEmbedder())
    fast.put_many(distinct(list(entries(240, n_problems=30, seed=9))))
    yield fast
    fast.close()


def hits(a: Archive, q: str, k: int, f: KernelFilter) -> list[tuple[str, float | None]]:
    return [(h.id, h.score) for h in a.search(q, k=k, filters=f)]


def reference(a: Archive, q: str, k: int, f: KernelFilter) -> list[tuple[str, float | None]]:
    return [(h.id, h.score) for h in database_search(a, q, k, f)]


@pytest.mark.parametrize("f", FILTERS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.model_dump().items()
                                                               if v is not None) or "any")
def test_in_memory_path_returns_the_same_top_k_as_the_database_path(archive: Archive, f: KernelFilter) -> None:
    fast = archive
    problem = fast.kernels(KernelFilter(outcome=None), limit=1)[0][0].problem_id
    for few_ids in (2000, 0):  # keywords among the allowed ids, or unfiltered matches read until enough pass
        fast.catalog.few_ids = few_ids
        for q in QUERIES:
            for k in (10, 40):
                assert hits(fast, q, k, f) == reference(fast, q, k, f), (q[:30], k, few_ids)
    pf = f.model_copy(update={"problem_id": problem})
    assert hits(fast, QUERIES[0], 10, pf) == reference(fast, QUERIES[0], 10, pf)


def test_writes_by_another_archive_object_are_seen_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    made = distinct(list(entries(60, n_problems=6, seed=5)))
    reader, writer = Archive(url, embedder=RandomEmbedder()), Archive(url, embedder=RandomEmbedder())
    writer.put_many(made[:40])
    q = "shared memory tiling"
    before = {h.id for h in reader.search(q, k=100, filters=KernelFilter(outcome=None))}
    assert len(before) == 40 and reader.catalog.loads == 1
    writer.put_many(made[40:])
    gone = made[3].candidate.id
    assert writer.delete(gone)
    after = {h.id for h in reader.search(q, k=100, filters=KernelFilter(outcome=None))}
    assert after == {e.candidate.id for e in made} - {gone} and reader.catalog.loads == 2
    reader.search(q, k=5)
    assert reader.catalog.loads == 2  # nothing changed: no reload
    assert hits(reader, q, 20, KernelFilter()) == reference(writer, q, 20, KernelFilter())


def test_broad_keyword_search_reads_further_until_enough_matches_pass_the_filter() -> None:
    from kevolve.archive import catalog

    ranked = np.arange(1, 401)  # candidate pks in BM25 order

    class Index:  # the one call the broad path makes
        limits: list[int] = []

        def keyword_unfiltered(self, conn, terms, limit):  # noqa: ANN001, ANN201
            self.limits.append(limit)
            return [int(x) for x in ranked[:limit]]

    class Snap:
        k_pk = ranked.copy()

        def rows(self, pks):  # noqa: ANN001, ANN201
            return np.searchsorted(self.k_pk, pks)

    allowed = Snap.k_pk > 300  # a quarter of the kernels, all at the bottom of the ranking
    index = Index()
    got = catalog.keyword(None, index, Snap(), ["x"], 20, allowed, few=0)  # type: ignore[arg-type]
    assert got == list(range(301, 321)) and len(index.limits) >= 2 and index.limits == sorted(index.limits)
