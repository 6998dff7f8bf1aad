"""`kevolve archive …`: the commands work end to end, and bad input is one line with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import needs_psycopg

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
    (["show", "nosuchkernel", "--db", "sqlite:///{tmp}/e.db"], "no archive at"),  # a read creates nothing
    (["import", "{tmp}/missing.jsonl", "--db", "sqlite:///{tmp}/e.db"], "no such file"),
    (["import", "{tmp}/bad.jsonl", "--db", "sqlite:///{tmp}/e.db"], "not JSON"),
    (["export", "{tmp}/nodir/x.jsonl", "--db", "sqlite:///{tmp}/e.db"], "no such folder"),
    (["export", "{tmp}/x.csv", "--format", "csv", "--db", "sqlite:///{tmp}/e.db"], "--format"),
    (["search", "x", "--db", "sqlite:////proc/forbidden/a.db"], "cannot"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    if any(a.startswith("postgresql+psycopg://") for a in args):
        needs_psycopg()
    (tmp_path / "bad.jsonl").write_text("[1, 2\n")
    r = run(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr


# ---- issue 37: output that keeps the code, formats that are what they say, paths that are not made up

@pytest.fixture
def wide(tmp_path: Path) -> tuple[str, str]:
    """(url, kernel id): one kernel with a 200-character source line, no level and no torch.compile timing,
    stored by the archive's own writer."""
    from kevolve.records import Candidate, Outcome

    e = next(entries(1, seed=5))
    cand = Candidate.from_source(e.candidate.source + "WIDE = '" + "x" * 200 + "'\n", e.problem.id, proposer="t")
    ev = e.evaluation.model_copy(update={"candidate_id": cand.id, "outcome": Outcome.OK, "reason": "ok",
                                         "timing": e.evaluation.ref_timing, "compile_ref_timing": None})
    url = f"sqlite:///{tmp_path / 'w.db'}"
    Archive(url, embedder=HashingEmbedder()).put(e.problem.model_copy(update={"level": None}), cand, ev)
    return url, cand.id


def cli(*args: str):  # noqa: ANN201 - a click Result
    from typer.testing import CliRunner

    from kevolve.cli import app

    return CliRunner().invoke(app, ["archive", *args])


def test_show_piped_keeps_every_source_line_whole_and_prints_no_unmeasured_number(wide) -> None:
    url, kid = wide
    r = cli("show", kid, "--db", url, "--embedder", "hashing")
    assert r.exit_code == 0, r.output
    assert "WIDE = '" + "x" * 200 + "'" in r.stdout.splitlines()  # one line, as stored: nothing cut at 80 columns
    assert "level None" not in r.stdout and "compile" not in r.stdout.splitlines()[0]
    assert "speedup 1.00x eager" in r.stdout.splitlines()[0]
    missing = cli("show", "0123456789abcdef", "--db", url, "--embedder", "hashing")
    assert missing.exit_code == 2 and "no kernel '0123456789abcdef'" in missing.stderr


def test_export_refuses_a_suffix_it_would_not_write_naming_the_ones_it_does(wide, tmp_path: Path) -> None:
    r = cli("export", str(tmp_path / "out.csv"), "--db", wide[0], "--embedder", "hashing")
    assert r.exit_code == 2 and r.stderr.strip().count("\n") == 0
    assert ".jsonl" in r.stderr and ".parquet" in r.stderr and not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("args", [["search", "relu"], ["show", "0123456789abcdef"], ["export", "{tmp}/k.jsonl"],
                                  ["import", "{tmp}/k.jsonl"]])
def test_a_mistyped_db_folder_is_refused_and_nothing_is_created(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "k.jsonl").write_text("")
    r = cli(*[a.replace("{tmp}", str(tmp_path)) for a in args], "--db", f"sqlite:///{tmp_path}/nonexistent/dir/x.db",
            "--embedder", "hashing")
    assert r.exit_code == 2 and "no such folder" in r.stderr and r.stderr.strip().count("\n") == 0, r.output
    assert not (tmp_path / "nonexistent").exists()


def test_a_read_creates_no_archive(tmp_path: Path) -> None:
    r = cli("search", "relu", "--db", f"sqlite:///{tmp_path}/typo.db", "--embedder", "hashing")
    assert r.exit_code == 2 and f"no archive at {tmp_path}/typo.db" in r.stderr and not (tmp_path / "typo.db").exists()


def test_serve_on_a_busy_port_is_one_error_line_and_never_says_serving(wide) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        r = cli("serve", "--db", wide[0], "--embedder", "hashing", "--port", str(busy.getsockname()[1]))
    assert r.exit_code == 2 and "serving" not in r.stdout, r.output
    assert r.stderr.startswith("error: cannot serve on 127.0.0.1:") and r.stderr.strip().count("\n") == 0


def test_the_audit_line_shows_one_speedup_and_names_it() -> None:
    import re

    from kevolve.records import Audit

    line = Audit(passed=True, reason="ok", speedup=1.02, judge_clock_speedup=0.87).summary
    assert line == "kept: measured again in a fresh process on fresh inputs, 1.02x vs eager"
    assert re.findall(r"\d+\.\d+x", line) == ["1.02x"]  # not the judge's clock's 0.87x beside it
    assert Audit(passed=True, reason="ok").summary == "kept: measured again in a fresh process on fresh inputs, " \
                                                      "no speedup measured"


def test_search_and_export_keep_to_the_run_named(tmp_path: Path) -> None:
    """--run (issue 37: no filter by run): only kernels that run evaluated, through search's in-memory catalog and
    export's SQL alike; a run that stored nothing finds nothing."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    first, second = list(entries(40, n_problems=4, seed=21)), list(entries(12, n_problems=4, seed=22))
    a = Archive(url, embedder=HashingEmbedder())
    a.put_many(first, run_kind="optimize")
    a.put_many(second, run_kind="bench")
    assert [(r.id, r.kind, r.kernels) for r in a.runs()] == [
        ("synthetic-22", "bench", len({e.candidate.id for e in second})),
        ("synthetic-21", "optimize", len({e.candidate.id for e in first}))]
    a.close()
    mine = {e.candidate.id for e in second}
    r = cli("search", "shared memory tiling", "--db", url, "--embedder", "hashing", "-k", "50", "--any-outcome",
            "--run", "synthetic-22", "--json")
    assert r.exit_code == 0, r.output
    assert {json.loads(line)["id"] for line in r.stdout.splitlines()} == mine  # all 12 found, none of the other run
    r = cli("export", str(tmp_path / "k.jsonl"), "--db", url, "--embedder", "hashing", "--run", "synthetic-22")
    assert r.exit_code == 0 and f"exported {len(mine)} kernels" in r.stdout, r.output
    assert {json.loads(line)["kevolve_kernel_id"] for line in (tmp_path / "k.jsonl").read_text().splitlines()} == mine
    r = cli("search", "relu", "--db", url, "--embedder", "hashing", "--run", "no-such-run")
    assert r.exit_code == 0 and "no kernels match" in r.stdout


def test_search_piped_prints_every_id_and_number_whole(db: str) -> None:
    """`archive search relu > hits.txt` cut each id to '89e7e6f…' (80 columns when not on a terminal): the id is
    what `archive show` takes."""
    hits = [json.loads(line) for line in cli("search", "shared memory", "--db", db, "--embedder", "hashing", "-k", "8",
                                             "--json").stdout.splitlines()]
    r = cli("search", "shared memory", "--db", db, "--embedder", "hashing", "-k", "8")
    assert r.exit_code == 0 and len(hits) == 8, r.output
    rows = [line for line in r.stdout.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == [h["id"] for h in hits], r.stdout
    assert all(f"{h['speedup']:.2f}x" in row and f"{h['score']:.4f}" in row for h, row in zip(hits, rows))
