"""The CLI starts without heavy imports, and usage errors are one line with exit code 2."""

from __future__ import annotations

import subprocess
import sys


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kevolve.cli", *args], capture_output=True, text=True, timeout=120)


def test_help_imports_no_torch_docker_or_sqlalchemy() -> None:
    code = ("import sys; sys.argv=['kevolve','--help'];\n"
            "import kevolve.cli\n"
            "try:\n    kevolve.cli.main()\nexcept SystemExit:\n    pass\n"
            "heavy=[m for m in ('torch','docker','sqlalchemy','langgraph') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert "HEAVY []" in out


def test_eval_missing_problem_file_is_one_line_error(tmp_path) -> None:
    r = run("eval", str(tmp_path / "nope.py"), str(tmp_path / "sol.py"), "--device", "cpu")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no such file" in r.stderr
    assert "Traceback" not in r.stderr


def test_eval_bad_device_flag_is_one_line_error(fixtures) -> None:
    p = fixtures / "problems" / "relu.py"
    r = run("eval", str(p), str(fixtures / "solutions" / "relu_cpp.py"), "--device", "tpu")
    assert r.returncode == 2 and "--device" in r.stderr and "Traceback" not in r.stderr


def test_eval_unknown_allow_category_is_one_line_error(fixtures) -> None:
    p = fixtures / "problems" / "relu.py"
    r = run("eval", str(p), str(fixtures / "solutions" / "relu_cpp.py"), "--device", "cpu", "--allow", "files",
            "--allow", "frames")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "--allow: unknown policy category 'frames'" in r.stderr and "Traceback" not in r.stderr
