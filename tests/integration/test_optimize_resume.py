"""`kevolve optimize` interrupted by a real signal, then `--resume`: the run goes on with the rest of its
budget and its counts are true (the CLI in a real process, the real openai SDK against the local fake
server, the real LocalSandbox and SQLite checkpointer, --device cpu).

Every reply is a distinct candidate the candidate policy rejects before anything runs, so an evaluation
takes milliseconds and no extension is built; the slow part is the judge preparing the problem once per
session (the feasibility check before the first LLM call): about 55 s per signal on two busy cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fake_llm_server import FakeLLMServer
from testpaths import BUILD_CACHE, FIXTURES

PROBLEM = FIXTURES / "problems" / "relu.py"


def rejected(i: int) -> str:
    """A distinct candidate (K differs) that the policy rejects: it imports subprocess."""
    return (f"```python\nimport subprocess\nimport torch\nK = {i}\n\nclass ModelNew(torch.nn.Module):\n"
            f"    def forward(self, x):\n        return torch.relu(x) * K\n```\n")


class SignallingServer(FakeLLMServer):
    """Sends `signum` to `pid` when request number `at` arrives, and answers it a second later: the signal
    lands while proposals are in flight, as a user's Ctrl-C after a few evaluations does."""

    pid: int = 0
    at: int = 0
    signum: int = signal.SIGINT
    arrived: int = 0

    def _answer(self, path: str, body: dict) -> tuple[int, dict]:
        with self._lock:
            self.arrived += 1
            now = self.arrived
        if self.pid and now == self.at:
            os.kill(self.pid, self.signum)
            time.sleep(1.0)
        return super()._answer(path, body)


def optimize(args: list[str], url: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=url, KEVOLVE_CACHE_DIR=str(BUILD_CACHE))
    # Ctrl-C as a terminal sends it: a run started in the background (nohup, `cmd &`) inherits SIGINT ignored,
    # and Python then keeps it ignored (no KeyboardInterrupt), as the user asked
    return subprocess.Popen([sys.executable, "-m", "kevolve.cli", "optimize", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_resume_after_a_signal_spends_the_rest_of_the_budget_with_true_counts(signum, code, tmp_path) -> None:
    server = SignallingServer(rules=[("Task:", [rejected(i) for i in range(40)])]).start()
    runs = tmp_path / "runs"
    try:
        t0 = time.monotonic()
        first = optimize([str(PROBLEM), "--llm", "openai:gpt-4o", "--runs-dir", str(runs), "--device", "cpu",
                          "--no-archive", "--llm-cache", str(tmp_path / "llm"), "--max-candidates", "10",
                          "--islands", "2", "--jobs-per-generation", "4", "--concurrency", "4",
                          "--max-repairs", "5", "--timeout", "120"], server.openai_url)
        server.pid, server.at, server.signum = first.pid, 6, signum  # in generation 1, after 4 evaluations
        _, err1 = first.communicate(timeout=600)
        s1 = time.monotonic() - t0
        assert first.returncode == code, err1[-3000:]
        assert "--resume" in err1.strip().splitlines()[-1] and "Traceback" not in err1
        run = next(runs.iterdir())
        assert not (run / "result.json").exists()
        before = [json.loads(x) for x in (run / "trials.jsonl").read_text().splitlines()]
        assert 4 <= len(before) < 10

        time.sleep(3.0)  # the run lies stopped: this is not search time
        t1 = time.monotonic()
        second = optimize(["--resume", run.name, "--runs-dir", str(runs), "--json", "--llm-cache",
                           str(tmp_path / "llm")], server.openai_url)
        out, err2 = second.communicate(timeout=600)
        s2 = time.monotonic() - t1
    finally:
        server.stop()
    assert "at its end" not in err2 and "Traceback" not in err2, err2[-3000:]
    result = json.loads(out)
    trials = [json.loads(x) for x in (run / "trials.jsonl").read_text().splitlines()]
    assert len({t["job"] for t in trials}) == len(trials) == 10  # the whole budget, no job twice
    assert result["stop_reason"].startswith("max_candidates"), result["stop_reason"]
    assert result["evaluated"] == sum(t["status"] == "evaluated" for t in trials) == 10
    assert result["proposals"] == 10 and result["outcomes"] == {"rejected": 10}
    assert result["generations"] == 1 + max(t["generation"] for t in trials)
    assert len([s for s in server.seen if s.status == 200]) == 10  # no LLM request repeated
    # The search itself takes well under a second here (measured: 0.24 s; preparing the problem is not search time);
    # the 3 s the run lay stopped are not in it either.
    assert 0 < result["elapsed_s"] < min(3.0, s1 + s2)
