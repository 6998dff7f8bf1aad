"""Search relevance (issue 37): a query that names an operation by another of its names finds that operation's
kernels first, not a ReLU or a pooling kernel. On the synthetic archive (archive/synthetic.py: known ops) with the
hashing embedder, as the archive tests use; the sentence embedder read "GEMM" as GELU the same way (checked by hand,
2026-11-27: GELU, attention and reductions first, no Matmul in the top 12)."""

from __future__ import annotations


import pytest

from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.store import Archive
from kevolve.archive.synthetic import entries
from kevolve.archive.text import expand_query


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Archive:
    a = Archive(f"sqlite:///{tmp_path_factory.mktemp('rel') / 'a.db'}", embedder=HashingEmbedder())
    a.put_many(list(entries(240, 12)), run_kind="synthetic")  # 12 ops, 20 kernels each
    yield a
    a.close()


@pytest.mark.parametrize(("query", "ops", "n"), [
    ("GEMM", {"Matmul", "Matmul_ReLU_Add"}, 5),
    ("matrix multiplication", {"Matmul", "Matmul_ReLU_Add"}, 5),
    ("matrix multiply", {"Matmul", "Matmul_ReLU_Add"}, 5),
    ("prefix sum", {"Cumsum"}, 3),  # then Sum_Reduction: "sum" is a word of both
    ("relu", {"ReLU", "Matmul_ReLU_Add"}, 5),
    ("Layer Normalization", {"LayerNorm"}, 5),
])
def test_a_query_finds_the_kernels_of_the_operation_it_names(archive: Archive, query: str, ops: set[str], n: int) -> None:
    top = archive.search(query, k=n)
    assert [k.problem_name.split("_", 1)[1] for k in top if k.problem_name.split("_", 1)[1] not in ops] == [], \
        [(k.problem_name, k.score) for k in top]


def test_expand_query_adds_the_usual_name_once() -> None:
    assert expand_query("GEMM") == "GEMM matmul"
    assert expand_query("matrix_multiplication") == "matrix_multiplication matmul"
    assert expand_query("fast matmul kernel") == "fast matmul kernel"  # named already
    assert expand_query("flash attention") == "flash attention"
    assert expand_query("conv2d tensor cores") == "conv2d tensor cores conv"
    assert expand_query("vectorized loads") == "vectorized loads"  # no operation named
