"""Archive.put / get / search on a real SQLite file (FTS5 + sqlite-vec), with the hashing embedder."""

from __future__ import annotations

from pathlib import Path

import pytest

from kevolve.archive import retrieve
from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.records import KernelFilter
from kevolve.archive.store import Archive, Entry
from kevolve.archive.synthetic import entries, kernel_source, problem_source
from kevolve.records import Candidate, Evaluation, Outcome, Problem, TimingStats


@pytest.fixture
def arch(tmp_path: Path) -> Archive:
    a = Archive(f"sqlite:///{tmp_path / 'a.db'}", embedder=HashingEmbedder())
    yield a
    a.close()


def _timing(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, trials=10, method="test")


def _entry(op: str, expr: str, tags: list[str], variant: int, outcome: Outcome = Outcome.OK,
           ms: float = 1.0, ref: float = 2.0, parents: tuple[str, ...] = (), level: int = 1) -> Entry:
    p = Problem.from_source(problem_source(op, expr), f"{op}.py", f"{variant}_{op}", level=level)
    c = Candidate.from_source(kernel_source(op, tags, variant), p.id, parent_ids=parents)
    ev = Evaluation(candidate_id=c.id, problem_id=p.id, outcome=outcome, reason=outcome.value,
                    timing=_timing(ms) if outcome is Outcome.OK else None, ref_timing=_timing(ref), device="H100")
    return Entry(problem=p, candidate=c, evaluation=ev)


def test_put_then_get_round_trips_source_evaluation_and_tags(arch: Archive) -> None:
    e = _entry("Matmul", "a @ b", ["shared_memory", "tiling"], 1)
    kid = arch.put(e.problem, e.candidate, e.evaluation, run_id="run-1")
    d = arch.get(kid)
    assert d is not None and d.kernel.source == e.candidate.source
    assert d.problem_source == e.problem.source
    assert d.kernel.speedup == pytest.approx(2.0) and d.kernel.outcome == "ok"
    assert {"shared_memory", "tiling"} <= set(d.kernel.techniques)
    assert d.evaluations[0].record == e.evaluation and d.evaluations[0].run_id == "run-1"
    assert arch.get(kid[:8]) is not None and arch.get("nope") is None


def test_putting_the_same_evaluation_twice_stores_it_once(arch: Archive) -> None:
    e = _entry("ReLU", "torch.relu(x)", [], 1)
    arch.put(e.problem, e.candidate, e.evaluation)
    arch.put(e.problem, e.candidate, e.evaluation)
    s = arch.stats()
    assert (s.problems, s.kernels, s.evaluations) == (1, 1, 1)


def test_best_verdict_is_the_fastest_ok_one(arch: Archive) -> None:
    e = _entry("ReLU", "torch.relu(x)", [], 1, outcome=Outcome.INCORRECT)
    arch.put(e.problem, e.candidate, e.evaluation)
    assert arch.get(e.candidate.id).kernel.outcome == "incorrect"
    for ms in (1.0, 0.5, 0.8):  # ok at 2x, then 4x, then a slower 2.5x that must not replace 4x
        ev = e.evaluation.model_copy(update={"outcome": Outcome.OK, "timing": _timing(ms), "wall_s": ms})
        arch.put(e.problem, e.candidate, ev)
    d = arch.get(e.candidate.id)
    assert d.kernel.outcome == "ok" and d.kernel.speedup == pytest.approx(4.0)
    assert len(d.evaluations) == 4


def test_filters_select_by_level_op_technique_speedup_and_outcome(arch: Archive) -> None:
    arch.put_many([_entry("Matmul", "a @ b", ["tensor_cores"], 1, ms=0.5, level=1),
                   _entry("Softmax", "torch.softmax(x, 1)", ["warp_shuffle"], 2, ms=1.5, level=2),
                   _entry("ReLU", "torch.relu(x)", [], 3, outcome=Outcome.COMPILE_ERROR, level=1)])
    ids = lambda f: {k.op_name for k in arch.kernels(f)[0]}  # noqa: E731
    assert ids(KernelFilter()) == {"Matmul", "Softmax"}  # default: ok only
    assert ids(KernelFilter(outcome=None)) == {"Matmul", "Softmax", "ReLU"}
    assert ids(KernelFilter(level=2)) == {"Softmax"}
    assert ids(KernelFilter(op="matm")) == {"Matmul"}
    assert ids(KernelFilter(technique="warp_shuffle")) == {"Softmax"}
    assert ids(KernelFilter(min_speedup=3.0)) == {"Matmul"}
    assert ids(KernelFilter(device="h100", outcome="compile_error")) == {"ReLU"}


def test_listing_sorts_and_pages(arch: Archive) -> None:
    arch.put_many([_entry("ReLU", "torch.relu(x)", [], i, ms=1.0 / (i + 1)) for i in range(7)])
    page, total = arch.kernels(sort="speedup", offset=2, limit=3)
    assert total == 7 and [k.speedup for k in page] == pytest.approx([10.0, 8.0, 6.0])
    with pytest.raises(ValueError, match="sort must be"):
        arch.kernels(sort="bogus")


def test_keyword_and_vector_search_find_the_matching_kernel_first(arch: Archive) -> None:
    arch.put_many(list(entries(120, n_problems=12, seed=3)))
    hits = arch.search("warp shuffle reduction shfl", k=5)
    assert hits and "warp_shuffle" in hits[0].techniques
    hits = arch.search(problem_source("Softmax", "torch.softmax(x, dim=1)"), k=5)
    assert hits[0].op_name == "Softmax" and all(h.source for h in hits)
    assert all(h.score is not None for h in hits) and hits == sorted(hits, key=lambda h: -h.score)


def test_search_filters_apply_inside_the_ranking(arch: Archive) -> None:
    arch.put_many(list(entries(120, n_problems=12, seed=4)))
    f = KernelFilter(technique="atomics", level=2)
    total = arch.kernels(f)[1]
    assert 0 < total < 60
    hits = arch.search("matrix multiply tiling", k=total + 5, filters=f)
    assert len(hits) == total  # every match, however poorly it ranks
    assert all("atomics" in h.techniques and h.level == 2 and h.outcome == "ok" for h in hits)


def test_lineage_lists_ancestors_and_descendants(arch: Archive) -> None:
    a = _entry("ReLU", "torch.relu(x)", [], 1)
    b = _entry("ReLU", "torch.relu(x)", ["fusion"], 2, parents=(a.candidate.id,))
    c = _entry("ReLU", "torch.relu(x)", ["tiling"], 3, parents=(b.candidate.id, "outside-archive"))
    arch.put_many([a, b, c])
    d = arch.get(b.candidate.id)
    edges = {(e.parent, e.child) for e in d.lineage}
    assert edges == {(a.candidate.id, b.candidate.id), (b.candidate.id, c.candidate.id)}
    assert d.parent_ids == (a.candidate.id,)
    assert set(arch.get(c.candidate.id).parent_ids) == {b.candidate.id, "outside-archive"}


def test_delete_removes_kernel_and_its_index_rows(arch: Archive) -> None:
    e = _entry("ReLU", "torch.relu(x)", ["shared_memory"], 1)
    arch.put(e.problem, e.candidate, e.evaluation)
    assert arch.delete(e.candidate.id) and not arch.delete(e.candidate.id)
    assert arch.get(e.candidate.id) is None and arch.search("relu shared", k=5) == []
    assert arch.stats().evaluations == 0


def test_a_failing_write_leaves_no_partial_rows(arch: Archive, monkeypatch: pytest.MonkeyPatch) -> None:
    good = [_entry("ReLU", "torch.relu(x)", [], i) for i in range(3)]
    calls = {"n": 0}
    real = arch.index.add_kernel

    def flaky(conn, pk, doc, vec):  # noqa: ANN001, ANN202
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("disk full")
        return real(conn, pk, doc, vec)

    monkeypatch.setattr(arch.index, "add_kernel", flaky)
    with pytest.raises(RuntimeError, match="disk full"):
        arch.put_many(good)
    s = arch.stats()
    assert (s.problems, s.kernels, s.evaluations, s.runs) == (0, 0, 0, 0)


def test_mismatched_ids_are_refused(arch: Archive) -> None:
    e = _entry("ReLU", "torch.relu(x)", [], 1)
    other = _entry("GELU", "gelu(x)", [], 2)
    with pytest.raises(ValueError, match="disagree"):
        arch.put(e.problem, other.candidate, other.evaluation)


def test_retrieve_returns_only_ok_kernels_of_similar_problems(arch: Archive) -> None:
    arch.put_many(list(entries(60, n_problems=12, seed=5)))
    hits = retrieve(problem_source("LayerNorm", "self.ln(x)"), k=3, archive=arch)
    assert len(hits) == 3 and hits[0].op_name == "LayerNorm"
    assert all(h.outcome == "ok" and h.speedup and h.source for h in hits)


def test_retrieve_without_an_archive_file_returns_nothing_and_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "none" / "archive.db"
    assert retrieve("class Model: pass", db_url=f"sqlite:///{db}") == []
    assert not db.exists() and not db.parent.exists()


def test_retrieve_from_an_unreachable_database_returns_nothing() -> None:
    assert retrieve("class Model: pass", db_url="postgresql+psycopg://nobody:pw@127.0.0.1:1/none") == []
