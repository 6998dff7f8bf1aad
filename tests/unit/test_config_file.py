"""`kevolve.toml` (kevolve/config_file.py): a command's defaults from a file, flags override, mistakes are one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import FIXTURES

RELU = str(FIXTURES / "problems" / "relu.py")
CPP = str(FIXTURES / "solutions" / "relu_cpp.py")
NO_GPU = "no CUDA GPU is visible"


def kevolve(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kevolve.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(autouse=True)
def _no_gpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("reads `device = \"cuda\"` from the file by its no-GPU error")


@pytest.mark.parametrize("command", [["eval", RELU, CPP], ["bench", "--suite", str(FIXTURES / "suite"), "--solutions", str(FIXTURES / "suite_solutions")]])
def test_a_setting_in_kevolve_toml_is_the_commands_default(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "kevolve.toml").write_text(f'[{command[0]}]\ndevice = "cuda"\n')
    r = kevolve(tmp_path, *command)
    assert r.returncode == 2 and NO_GPU in r.stderr, r.stderr


def test_a_flag_overrides_the_file(tmp_path: Path) -> None:
    (tmp_path / "kevolve.toml").write_text('[eval]\ndevice = "cuda"\n')
    r = kevolve(tmp_path, "eval", RELU, "missing.py", "--device", "cpu")
    assert r.returncode == 2 and r.stderr.strip() == "error: missing.py: no such file", r.stderr


def test_config_names_another_file_and_dashes_or_underscores_both_name_a_flag(tmp_path: Path) -> None:
    cfg = tmp_path / "mine.toml"
    cfg.write_text('[eval]\ncompile_baseline = "sometimes"\n')
    r = kevolve(tmp_path, "--config", str(cfg), "eval", RELU, CPP)
    assert r.returncode == 2 and "--compile-baseline must be auto, on or off, not 'sometimes'" in r.stderr, r.stderr


@pytest.mark.parametrize(("text", "says"), [
    ("[eval]\ntrails = 7\n", "[eval] has no setting 'trails' (settings: allow"),
    ("[eval]\ntrials = 1\n", "[eval] trials = 1: Input should be greater than or equal to 3"),
    ('[eval]\ntrials = "many"\n', "[eval] trials = 'many': Input should be a valid integer"),
    ("[evaluate]\n", "[evaluate] is not a table kevolve reads (use [optimize], [bench], [eval])"),
    ("trials = ", "is not valid TOML"),
])
def test_a_mistake_in_the_file_is_one_error_line(tmp_path: Path, text: str, says: str) -> None:
    (tmp_path / "kevolve.toml").write_text(text)
    r = kevolve(tmp_path, "eval", RELU, CPP)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: config file kevolve.toml") and says in r.stderr, r.stderr


def test_a_missing_config_file_is_one_line(tmp_path: Path) -> None:
    r = kevolve(tmp_path, "--config", "nowhere.toml", "doctor")
    assert (r.returncode, r.stderr) == (2, "error: config file nowhere.toml not found\n")


def test_no_file_no_change(tmp_path: Path) -> None:
    r = kevolve(tmp_path, "eval", RELU, "missing.py")
    assert r.stderr.strip() == "error: missing.py: no such file", r.stderr
