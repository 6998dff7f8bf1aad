"""`kevolve optimize` refuses a problem whose data cannot fit before its first LLM call, with the line `kevolve
eval` gives (issue 37: it called the LLM four times first). A real process, the real judge, the fake server."""

from __future__ import annotations

import os
import subprocess
import sys

from fake_llm_server import FakeLLMServer

BIG_RELU = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(1024, 262144)]


def get_init_inputs():
    return []
"""


def test_a_problem_too_large_for_the_memory_limit_is_refused_before_any_llm_call(tmp_path) -> None:
    problem = tmp_path / "big_relu.py"
    problem.write_text(BIG_RELU)  # 1 GiB of inputs a draw against a 0.5 GiB limit
    server = FakeLLMServer(rules=[("Task:", ["```python\nprint('never asked')\n```"])]).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.openai_url)
    try:
        r = subprocess.run([sys.executable, "-m", "kevolve.cli", "optimize", str(problem), "--llm", "openai:gpt-4o",
                            "--device", "cpu", "--no-archive", "--no-cache", "--memory-limit-gb", "0.5", "--quiet",
                            "--runs-dir", str(tmp_path / "runs")], env=env, capture_output=True, text=True, timeout=300)
    finally:
        server.stop()
    assert server.seen == []
    errors = [x for x in r.stderr.splitlines() if not x.startswith("run ")]
    assert r.returncode == 2 and len(errors) == 1 and errors[0].startswith("error: "), r.stderr[-2000:]
    assert "memory_limit" in errors[0] and "Traceback" not in r.stderr
