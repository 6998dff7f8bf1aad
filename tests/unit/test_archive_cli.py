"""`kevolve archive …`: the commands work end to end, and bad input is one line with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.store import Archive
from kevolve.archive.synthetic import entries


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kevolve.cli", "archive", *args], capture_output=True, text=True,
                          timeout=180)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'a.db'}"
    Archive(url, embedder=HashingEmbedder()).put_many(list(entries(60, n_problems=6, seed=2)))
    return url


def test_search_prints_json_hits_with_filters(db: str) -> None:
    r = run("search", "warp shuffle", "--db", db, "--embedder", "hashing", "-k", "4", "--json", "--level", "1")
    assert r.returncode == 0, r.stderr
    hits = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(hits) == 4 and all(h["level"] == 1 and h["outcome"] == "ok" for h in hits)


def test_search_takes_a_problem_file(db: str, tmp_path: Path) -> None:
    from kevolve.archive.synthetic import OPS, problem_source

    f = tmp_path / "softmax.py"
    f.write_text(problem_source("Softmax", OPS["Softmax"]))
    r = run("search", str(f), "--db", db, "--embedder", "hashing", "-k", "1", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["op_name"] == "Softmax"


def test_show_export_and_import(db: str, tmp_path: Path) -> None:
    kid = json.loads(run("search", "tiling", "--db", db, "--embedder", "hashing", "-k", "1", "--json").stdout)["id"]
    r = run("show", kid[:8], "--db", db, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["kernel"]["id"] == kid
    assert kid in run("show", kid, "--db", db).stdout
    out = tmp_path / "all.parquet"
    r = run("export", str(out), "--db", db)
    assert r.returncode == 0 and "exported 60 kernels" in r.stdout
    new_db = f"sqlite:///{tmp_path / 'b.db'}"
    r = run("import", str(out), "--db", new_db, "--embedder", "hashing", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kernels_added"] == 60


@pytest.mark.parametrize("args,needle", [
    (["search", "x", "--db", "postgresql+psycopg://nobody:pw@127.0.0.1:1/none"], "cannot open the archive"),
    (["search", "x", "--db", "mysql://x"], "unsupported database"),
    (["search", "x", "--db", "::::"], "not a database URL"),
    (["show", "nosuchkernel", "--db", "sqlite:///{tmp}/e.db"], "no kernel"),
    (["import", "{tmp}/missing.jsonl", "--db", "sqlite:///{tmp}/e.db"], "no such file"),
    (["import", "{tmp}/bad.jsonl", "--db", "sqlite:///{tmp}/e.db"], "not JSON"),
    (["export", "{tmp}/nodir/x.jsonl", "--db", "sqlite:///{tmp}/e.db"], "no such folder"),
    (["export", "{tmp}/x.csv", "--format", "csv", "--db", "sqlite:///{tmp}/e.db"], "--format"),
    (["search", "x", "--db", "sqlite:////proc/forbidden/a.db"], "cannot"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    (tmp_path / "bad.jsonl").write_text("[1, 2\n")
    r = run(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
