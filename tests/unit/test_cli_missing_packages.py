"""What `pip install kevolve` leaves out (Postgres, Parquet, Ray, CuPy) is one line naming the extra; a
package missing from a partial install is one line too. Never a traceback (issue 16)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from kevolve.extras import install_hint

BLOCK = "import sys\nfor m in {mods!r}:\n    sys.modules[m] = None  # import m -> ModuleNotFoundError\n" \
        "sys.argv = ['kevolve', *{argv!r}]\nfrom kevolve.cli import main\nmain()\n"


def kevolve_without(mods: list[str], *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env_home = {"KEVOLVE_HOME": str(cwd / "home"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", BLOCK.format(mods=mods, argv=list(argv))], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env_home)


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def test_parquet_without_pyarrow_names_the_archive_extra(tmp_path: Path) -> None:
    r = kevolve_without(["pyarrow"], "archive", "export", str(tmp_path / "k.parquet"), "--embedder", "hashing",
                        cwd=tmp_path)
    assert r.returncode == 2
    assert "pip install 'kevolve[archive]'" in one_error_line(r)


def test_ray_executor_without_ray_names_the_bench_extra(fixtures: Path, tmp_path: Path) -> None:
    r = kevolve_without(["ray"], "bench", "--suite", str(fixtures / "suite"), "--solutions",
                        str(fixtures / "suite_solutions"), "--executor", "ray", "--device", "cpu", cwd=tmp_path)
    assert r.returncode == 2
    assert one_error_line(r) == "error: --executor ray needs the Python package 'ray', which is not installed: " \
                                "pip install 'kevolve[bench]'"


def test_a_partial_install_without_sqlalchemy_is_one_line(tmp_path: Path) -> None:
    r = kevolve_without(["sqlalchemy"], "archive", "search", "relu", cwd=tmp_path)
    assert r.returncode == 2
    assert one_error_line(r) == f"error: {install_hint('sqlalchemy')}"


def test_optimize_goes_on_without_archive_ingest_when_the_archive_cannot_load(monkeypatch, caplog) -> None:
    from kevolve.agent.run import archive_storer
    from kevolve.archive.ingest import IngestMode

    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    for m in [m for m in sys.modules if m.startswith("kevolve.archive.") and m != "kevolve.archive.ingest"]:
        monkeypatch.delitem(sys.modules, m)  # imported afresh, as in a process that never had sqlalchemy
    with caplog.at_level(logging.WARNING):
        assert archive_storer(IngestMode.ALL, "sqlite:////nonexistent/archive.db") is None
    assert "archive ingest skipped" in caplog.text and "sqlalchemy" in caplog.text
