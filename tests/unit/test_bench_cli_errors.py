"""`kevolve bench` usage errors: one line on stderr, exit code 2, no traceback, no heavy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import needs_psycopg


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kevolve.cli", "bench", *args], capture_output=True, text=True,
                          timeout=120)


def test_bench_help_imports_no_torch_or_ray() -> None:
    code = ("import sys; sys.argv=['kevolve','bench','--help']\nimport kevolve.cli\n"
            "try:\n    kevolve.cli.main()\nexcept SystemExit:\n    pass\n"
            "print('HEAVY', [m for m in ('torch', 'ray', 'matplotlib') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert "HEAVY []" in out and "--solutions" in out


@pytest.mark.parametrize(("args", "msg"), [
    (["--level", "1"], "--suite"),
    (["--suite", "{suite}", "--level", "9"], "--level"),
    (["--suite", "{suite}", "--level", "1", "--problems", "3-1"], "backwards"),
    (["--suite", "{suite}", "--level", "1", "--match", "("], "--match"),
    (["--suite", "{missing}", "--level", "1"], "no such folder"),
    (["--suite", "{suite}", "--level", "1", "--problems", "90"], "no problem matches"),
    (["--suite", "{suite}", "--level", "1", "--solutions", "{suite}", "--executor", "slurm"], "--executor"),
    (["--suite", "{suite}", "--level", "1", "--solutions", "{missing}"], "--solutions"),
    (["--suite", "{suite}", "--level", "1", "--archive-db", "postgresql+psycopg://nobody:pw@127.0.0.1:1/none"],
     "cannot open the archive"),
    (["--suite", "{suite}", "--level", "1", "--allow", "threads", "--allow", "frames"], "unknown policy category"),
    (["--suite", "{suite}", "--level", "1", "--language", "triton"], "--language needs --optimize"),
])
def test_bad_input_is_one_line_exit_2(fixtures: Path, tmp_path: Path, args: list[str], msg: str) -> None:
    args = [a.format(suite=fixtures / "suite", missing=tmp_path / "nope") for a in args]
    if any(a.startswith("postgresql+psycopg://") for a in args):
        needs_psycopg()
    if "--solutions" not in args:
        args += ["--solutions", str(fixtures / "suite_solutions")]
    r = run(*args, "--device", "cpu")
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error:") and r.stderr.strip().count("\n") == 0 and msg in r.stderr
    assert "Traceback" not in r.stderr


def test_compare_of_non_runs_is_one_line_exit_2(tmp_path: Path) -> None:
    r = run("compare", str(tmp_path), str(tmp_path))
    assert r.returncode == 2 and "not a bench run folder" in r.stderr and "Traceback" not in r.stderr
