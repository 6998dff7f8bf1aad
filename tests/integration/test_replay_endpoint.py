"""The replay endpoint end to end on the CPU: `kevolve optimize --device cpu` with the real openai and
anthropic SDKs pointed at a ReplayServer whose corpus this test writes with the production writer.

The corpus holds four kernels for the ReLU problem — a compile error, a wrong kernel kept as a messy raw
reply (prose, a four-backtick fence), a slow one and the fast one — filed under relu_big.py (same Model,
other sizes, as KernelBench problems differ between releases), and a softmax kernel for another problem
that must never be served. The run has to extract every reply, judge each kernel for what it is, and keep
the fast one. The sources are those of test_optimize_cpu, so the shared build cache builds them once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import BUILD_CACHE, FIXTURES, OPTIMIZE_EXIT

from kevolve.agent.llm.replay import ReplayBook, ReplaySample, read_corpus, write_corpus
from kevolve.agent.llm.replay_server import ReplayServer

PROBLEMS, SOL = FIXTURES / "problems", FIXTURES / "solutions"
RELU_KERNELS = ("relu_compile_error.py", "relu_wrong.py", "relu_slow.py", "relu_cpp.py")


def corpus(folder: Path) -> Path:
    relu, softmax = (PROBLEMS / "relu_big.py").read_text(), (PROBLEMS / "softmax.py").read_text()
    wrong = (SOL / "relu_wrong.py").read_text()
    messy = ("I'll write a vectorized ReLU. First the idea:\n\n```cpp\nout[i] = x[i] > 0 ? x[i] : 0;\n```\n\n"
             f"Full module:\n\n````python\n{wrong}````\n\nThis avoids PyTorch's dispatcher overhead.")
    samples = [ReplaySample(problem="level1/19_ReLU", problem_source=relu, model=f"model-{i}",
                            code=(SOL / name).read_text(), reply=messy if name == "relu_wrong.py" else "")
               for i, name in enumerate(RELU_KERNELS)]
    samples.insert(2, ReplaySample(problem="level1/23_Softmax", problem_source=softmax, model="model-s",
                                   code=(SOL / "softmax_cpp.py").read_text()))
    return write_corpus(folder, samples)


@pytest.fixture
def server(tmp_path):
    s = ReplayServer(ReplayBook(read_corpus(corpus(tmp_path / "corpus")))).start()
    yield s
    s.stop()


def optimize(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    full.update(env, KEVOLVE_CACHE_DIR=str(BUILD_CACHE))
    return subprocess.run([sys.executable, "-m", "kevolve.cli", "optimize", *args], env=full, capture_output=True,
                          text=True, timeout=1500)


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_replayed_real_kernels_run_through_the_loop(server: ReplayServer, tmp_path: Path, vendor: str) -> None:
    env = ({"OPENAI_API_KEY": "sk-replay", "OPENAI_BASE_URL": server.openai_url} if vendor == "openai"
           else {"ANTHROPIC_API_KEY": "sk-replay", "ANTHROPIC_BASE_URL": server.anthropic_url})
    llm = "openai:gpt-4o" if vendor == "openai" else "anthropic:claude-sonnet-4"
    r = optimize([str(PROBLEMS / "relu.py"), "--llm", llm, "--device", "cpu", "--no-archive", "--islands", "2",
                  "--jobs-per-generation", "2", "--concurrency", "2", "--patience", "1", "--max-candidates", "6",
                  "--seed", "5", "--timeout", "400", "--no-cache", "--runs-dir", str(tmp_path / "runs"), "--json",
                  "--quiet"], env)
    result = json.loads(r.stdout)
    assert r.returncode == OPTIMIZE_EXIT[result["answer"]], r.stderr[-3000:]  # the CPU ReLU may not beat eager
    run = Path(result["run_dir"])
    trials = [json.loads(x) for x in (run / "trials.jsonl").read_text().splitlines()]
    evaluated = [t for t in trials if t["status"] == "evaluated"]
    kernels = {(SOL / n).read_text().strip() + "\n": n for n in RELU_KERNELS}
    seen = {kernels.get((run / "candidates" / f"{t['candidate']}.py").read_text(), "?") for t in evaluated}
    assert seen == set(RELU_KERNELS), (seen, trials)  # every reply extracted to the very kernel replayed
    assert {"compile_error", "incorrect", "ok"} <= set(result["outcomes"]), result["outcomes"]
    best = Path(result["best_path"]).read_text()  # a '# kevolve: …' header, then the candidate as replayed
    assert best.strip().endswith((SOL / "relu_cpp.py").read_text().strip()), best[:300]
    served = server.book.served
    assert {p for _, p, _ in served} == {"level1/19_ReLU"} and server.book.unmatched == 0
    assert {"translate", "repair"} <= {op for op, _, _ in served}
    assert result["prompt_tokens"] > 0 and result["completion_tokens"] > 0 and result["cost_usd"] > 0
