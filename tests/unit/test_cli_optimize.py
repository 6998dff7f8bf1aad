"""`kevolve optimize` usage: bad input is one line on stderr with exit code 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from testpaths import needs_psycopg


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", "kevolve.cli", "optimize", *args], capture_output=True, text=True,
                          timeout=120, env=base)


def test_graph_prints_mermaid() -> None:
    r = run("--graph")
    assert r.returncode == 0
    for edge in ("retrieve --> plan", "plan -.-> propose", "propose -.-> evaluate", "evaluate --> select",
                 "select -.-> plan", "select -.-> finish"):
        assert edge in r.stdout


@pytest.mark.parametrize(("args", "needle"), [
    (["{relu}", "--llm", "gpt-4o"], "PROVIDER:MODEL"),
    (["{relu}", "--llm", "nope:model"], "unknown provider"),
    (["{relu}", "--llm", "openai:gpt-4o"], "OPENAI_API_KEY"),
    (["{relu}", "--llm", "anthropic:claude-sonnet-4-6"], "ANTHROPIC_API_KEY"),
    (["{relu}", "--llm", "compatible:m"], "--base-url"),
    (["{missing}", "--llm", "vllm:m"], "no such file"),
    (["{relu}:Model", "--llm", "vllm:m", "--input", "float32(3)"], "--input"),
    (["{relu}:Nope", "--llm", "vllm:m", "--input", "float32[3]"], "no class Nope"),
    (["{relu}", "--llm", "vllm:m", "--budget", "lots"], "--budget"),
    (["{relu}", "--llm", "vllm:m", "--time-limit", "soon"], "duration"),
    (["--llm", "vllm:m"], "MODULE"),
    (["--resume", "no-such-run", "--llm", "vllm:m"], "no such run"),
    (["{relu}", "--llm", "vllm:m", "--archive-ingest", "best"], "--archive-ingest must be winners, all or none"),
    (["{relu}", "--llm", "vllm:m", "--archive-db", "postgresql+psycopg://nobody:pw@127.0.0.1:1/none"],
     "cannot open the archive"),
    (["{relu}", "--llm", "vllm:m", "--archive-db", "nonsense"], "not a database URL"),
    (["{relu}", "--llm", "vllm:m", "--allow", "frames"], "unknown policy category 'frames'"),
    (["{relu}", "--llm", "vllm:m", "--language", "rust"], "--language must be one of cuda, cupy, triton, not 'rust'"),
    (["{relu}", "--llm", "vllm:m", "--language", "triton"], "--language triton writes GPU kernels: it needs --device cuda"),
    (["{relu}", "--llm", "vllm:m", "--language", "cupy"], "--language cupy writes GPU kernels"),
    (["--parts", "--resume", "some-run", "--llm", "vllm:m"], "--resume some-run: no such run"),
    (["{relu}", "--llm", "vllm:m", "--max-gpu-seconds", "soon"], "'soon': expected a duration"),  # --budget-device
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str, fixtures, tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from kevolve.cli import app

    if any(a.startswith("postgresql+psycopg://") for a in args):
        needs_psycopg()
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    relu = str(fixtures / "problems" / "relu.py")
    argv = [a.format(relu=relu, missing=str(tmp_path / "absent.py")) for a in args]
    r = CliRunner().invoke(app, ["optimize", *argv, "--device", "cpu", "--runs-dir", str(tmp_path / "runs")])
    assert r.exit_code == 2, r.stderr
    assert needle in r.stderr and r.stderr.strip().count("\n") == 0
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_one_subprocess_check_of_the_real_exit_code(tmp_path) -> None:
    r = run(str(tmp_path / "absent.py"), "--llm", "vllm:m", "--device", "cpu")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "no such file" in r.stderr


def test_language_reaches_the_config_and_is_saved_with_the_run(tmp_path) -> None:
    from kevolve.agent.config import OptimizeConfig
    from kevolve.agent.settings import build_config
    from kevolve.records import KernelLanguage

    config = build_config(llm="vllm:m", env={}, device="cuda", language="Triton", runs_dir=tmp_path)
    assert config.language is KernelLanguage.TRITON
    assert OptimizeConfig.model_validate_json(config.model_dump_json()).language is KernelLanguage.TRITON
    assert build_config(llm="vllm:m", env={}, device="cpu", language="cuda").language is KernelLanguage.CUDA
    assert build_config(llm="vllm:m", env={}, device="cuda").language is None
