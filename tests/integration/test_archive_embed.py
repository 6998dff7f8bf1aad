"""The packaged all-MiniLM-L6-v2, run by our own forward, matches sentence-transformers and is pinned."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from kevolve.archive.embed import EmbeddingError, MiniLM, model_dir

TEXTS = ["tiled matrix multiplication with shared memory", "elementwise relu activation",
         "class Model(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=1)\n" * 20]


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    return MiniLM()


def test_embeddings_are_unit_vectors_and_semantic(minilm: MiniLM) -> None:
    v = minilm.embed(["matrix multiplication kernel", "GEMM matmul of two matrices", "a recipe for apple pie"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_matches_sentence_transformers(minilm: MiniLM) -> None:
    st = pytest.importorskip("sentence_transformers")
    ref = st.SentenceTransformer(str(model_dir()), device="cpu").encode(TEXTS, normalize_embeddings=True)
    ours = minilm.embed(TEXTS)
    assert np.min(np.sum(ours * ref, axis=1)) > 0.9999


def test_batch_and_single_agree(minilm: MiniLM) -> None:
    texts = [TEXTS[0], TEXTS[1], TEXTS[2][:300]]  # different lengths: padding must not leak into the mean
    batch = minilm.embed(texts)
    single = np.vstack([minilm.embed([t]) for t in texts])
    assert np.allclose(batch, single, atol=1e-4)


def test_weights_that_are_not_the_pinned_ones_are_refused(tmp_path: Path) -> None:
    d = tmp_path / "model"
    shutil.copytree(model_dir(), d)
    with (d / "model.safetensors").open("r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x00\x01\x02\x03")
    with pytest.raises(EmbeddingError, match="not the pinned"):
        MiniLM(path=d).embed(["x"])


def test_archive_with_minilm_retrieves_kernels_of_the_same_op(minilm: MiniLM, tmp_path: Path) -> None:
    from kevolve.archive import retrieve
    from kevolve.archive.store import Archive
    from kevolve.archive.synthetic import OPS, entries, problem_source

    arch = Archive(f"sqlite:///{tmp_path / 'a.db'}", embedder=minilm)
    arch.put_many(list(entries(48, n_problems=12, seed=51)))
    for op in ("Softmax", "Conv2d", "Matmul"):
        hits = retrieve(problem_source(op, OPS[op]).replace("# problem", "# a new problem"), k=2, archive=arch)
        assert hits and hits[0].op_name == op, (op, [h.op_name for h in hits])
    hits = arch.search("tensor core wmma matrix fragments", k=3)
    assert "tensor_cores" in hits[0].techniques
