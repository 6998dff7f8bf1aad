"""The browser API: reads open, writes need the token, bad input is a 4xx with a message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kevolve.archive.web import create_app
from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.sakana import to_row
from kevolve.archive.store import Archive
from kevolve.archive.synthetic import entries

TOKEN = "t0ken-for-tests"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Archive:
    """A read-only archive for the tests that only read."""
    a = Archive(f"sqlite:///{tmp_path_factory.mktemp('api') / 'a.db'}", embedder=HashingEmbedder())
    a.put_many(list(entries(80, n_problems=8, seed=7)))
    yield a
    a.close()


@pytest.fixture
def client(shared: Archive) -> TestClient:
    return TestClient(create_app(shared, token=TOKEN))


@pytest.fixture
def arch(tmp_path: Path) -> Archive:
    """A small archive of its own, for tests that write."""
    a = Archive(f"sqlite:///{tmp_path / 'w.db'}", embedder=HashingEmbedder())
    a.put_many(list(entries(10, n_problems=2, seed=8)))
    yield a
    a.close()


def test_kernels_list_filters_sorts_and_pages(client: TestClient) -> None:
    r = client.get("/api/kernels", params={"limit": 5, "offset": 0, "sort": "speedup"})
    page = r.json()
    assert r.status_code == 200 and len(page["items"]) == 5 and page["total"] > 5
    speeds = [k["speedup"] for k in page["items"]]
    assert speeds == sorted(speeds, reverse=True) and all(k["source"] is None for k in page["items"])
    r = client.get("/api/kernels", params={"technique": "tensor_cores", "level": 2, "limit": 500})
    assert all("tensor_cores" in k["techniques"] and k["level"] == 2 for k in r.json()["items"])


def test_one_kernel_has_source_evaluations_and_lineage(client: TestClient) -> None:
    kid = client.get("/api/kernels", params={"sort": "created"}).json()["items"][0]["id"]
    d = client.get(f"/api/kernels/{kid}").json()
    assert d["kernel"]["source"].startswith("import torch") and d["evaluations"][0]["record"]["candidate_id"] == kid
    assert any(e["child"] == kid for e in d["lineage"])
    assert client.get("/api/kernels/ffffffffffff").status_code == 404


def test_search_stats_problems_and_leaderboard(client: TestClient) -> None:
    hits = client.get("/api/search", params={"q": "warp shuffle", "k": 3}).json()
    assert len(hits) == 3 and "warp_shuffle" in hits[0]["techniques"]
    assert client.get("/api/stats").json()["kernels"] == 80
    probs = client.get("/api/problems").json()
    assert probs["total"] == 8
    board = client.get(f"/api/problems/{probs['items'][0]['id']}/leaderboard").json()
    assert board and [k["speedup"] for k in board] == sorted([k["speedup"] for k in board], reverse=True)


@pytest.mark.parametrize("path,params", [
    ("/api/kernels", {"limit": 0}), ("/api/kernels", {"limit": 10_000}), ("/api/kernels", {"min_speedup": "nan"}),
    ("/api/kernels", {"min_speedup": "inf"}), ("/api/kernels", {"sort": "random"}), ("/api/kernels", {"op": "a\x00b"}),
    ("/api/search", {"q": ""}), ("/api/search", {"q": "x", "k": 1000}), ("/api/kernels/bad id!", {}),
])
def test_invalid_input_is_422_with_a_message(client: TestClient, path: str, params: dict) -> None:
    r = client.get(path, params=params)
    assert r.status_code in (404, 422) and r.json()["detail"]


def test_writes_without_the_token_are_refused(arch: Archive) -> None:
    client = TestClient(create_app(arch, token=TOKEN))
    kid = arch.kernels()[0][0].id
    assert client.delete(f"/api/kernels/{kid}").status_code == 401
    assert client.delete(f"/api/kernels/{kid}", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/api/import", json={"rows": []}).status_code == 401
    assert arch.get(kid) is not None
    assert client.delete(f"/api/kernels/{kid}", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 204
    assert arch.get(kid) is None


def test_a_server_without_a_token_refuses_every_write(arch: Archive) -> None:
    c = TestClient(create_app(arch, token=None))
    kid = arch.kernels()[0][0].id
    assert c.delete(f"/api/kernels/{kid}", headers={"Authorization": "Bearer anything"}).status_code == 403


def test_import_with_the_token_adds_rows_and_reports_bad_ones(arch: Archive, tmp_path: Path) -> None:
    client = TestClient(create_app(arch, token=TOKEN))
    other = Archive(f"sqlite:///{tmp_path / 'b.db'}", embedder=HashingEmbedder())
    other.put_many(list(entries(5, n_problems=1, seed=99)))
    rows = [to_row(k, src, ev, parents) for k, src, ev, parents in other.iter_entries()]
    rows.append({"CUDA_Code": "x"})  # no PyTorch_Code_Module
    rows.append({"CUDA_Code": "y", "PyTorch_Code_Module": "z", "CUDA_Runtime": 1e400, "Task_ID": float("inf")})
    r = client.post("/api/import", content=json.dumps({"rows": rows}),  # allows Infinity, as clients may send
                    headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    body = r.json()
    assert r.status_code == 200, body
    assert body["rows"] == 7 and body["kernels_added"] == 6 and body["skipped"] == 1
    assert "PyTorch_Code_Module" in body["first_error"]


def test_page_and_static_files_are_served(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and "kevolve archive" in r.text
    assert client.get("/static/app.js").status_code == 200
