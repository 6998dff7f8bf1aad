"""The PostgreSQL-URL cases of the CLI tests skip where psycopg cannot be imported, and fail nothing (issue 37:
test_bench_cli_errors.py failed there, the CLI answering 'the driver psycopg is not installed' instead of 'cannot
open the archive'). psycopg is hidden from a child pytest and the `kevolve` processes it starts by a package of that
name first on PYTHONPATH that raises ImportError (sys.modules would hide it from the child alone); the installed
package is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testpaths import FIXTURES

TESTS = FIXTURES.parent
CASES = [f"{TESTS}/unit/test_bench_cli_errors.py::test_bad_input_is_one_line_exit_2[args8-cannot open the archive]",
         f"{TESTS}/unit/test_archive_cli.py::test_bad_input_is_one_line_and_exit_2[args0-cannot open the archive]",
         f"{TESTS}/unit/test_cli_optimize.py::test_bad_input_is_one_line_and_exit_2[args13-cannot open the archive]"]


def test_postgresql_url_cases_skip_where_psycopg_cannot_be_imported(tmp_path: Path) -> None:
    (tmp_path / "psycopg").mkdir()
    (tmp_path / "psycopg" / "__init__.py").write_text("raise ImportError('psycopg hidden by a test', name='psycopg')\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # on CI a missing driver fails on purpose
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH")) if p)
    hidden = subprocess.run([sys.executable, "-c", "import psycopg"], env=env, capture_output=True, text=True, check=False)
    assert "psycopg hidden by a test" in hidden.stderr  # the stub, not the installed package, is what imports
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *CASES], env=env,
                       capture_output=True, text=True, timeout=600, cwd=TESTS.parent, check=False)
    assert r.returncode == 0, r.stdout[-3000:]
    assert "3 skipped" in r.stdout and "failed" not in r.stdout, r.stdout[-3000:]
    assert "psycopg is not installed" in r.stdout
