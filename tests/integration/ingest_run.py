"""A small, fully sequential optimize run for the archive-ingest tests: a scripted LLM, a fake sandbox
whose verdict is written in the candidate (``VARIANT = 'ok_2_5'`` is ok at 2.5x, ``wrong`` is incorrect,
``cerr`` a compile error), and the real graph, checkpointer, run folder and archive (a SQLite file,
the hashing embedder).

    python ingest_run.py RUNS_DIR DB_URL MODE [--block-at N] [--resume RUN_ID]

``--block-at N`` makes the N-th evaluation hang (after writing ``RUNS_DIR/blocked``), so a test can
kill the process while a candidate is being evaluated.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from kevolve.agent.config import EvolutionConfig, LLMConfig, OptimizeConfig, StopConfig
from kevolve.agent.llm.scripted import ScriptedLLM
from kevolve.agent.result import Result
from kevolve.agent.run import run_optimize
from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.ingest import Ingestor
from kevolve.archive.store import Archive
from kevolve.contract import problem_from_source
from kevolve.records import Evaluation, Outcome, TimingStats
from kevolve.sandbox.config import SandboxConfig

PROBLEM = problem_from_source(
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    "def get_inputs():\n    return [torch.randn(8)]\ndef get_init_inputs():\n    return []\n", "relu.py")


def reply(tag: str) -> str:
    return (f"```python\nimport torch\nVARIANT = '{tag}'\nclass ModelNew(torch.nn.Module):\n"
            f"    def forward(self, x):\n        return x\n```\n")


# Two translations (one wrong), its repair, then mutations whose speedups go up and down.
SCRIPT = [("Task: translate", [reply("wrong"), reply("ok_0_5")]),
          ("Task: repair", [reply("ok_1_5")]),
          ("Task: mutate", [reply(t) for t in ("ok_1_2", "ok_2_0", "cerr", "ok_1_8", "ok_3_0", "ok_2_5", "ok_3_5")]),
          ("Task: crossover", [reply("ok_0_9")])]
MAX_CANDIDATES = 9  # candidates the script has evaluated by the end of its budget
# --max-candidates counts LLM calls (a duplicate reply spends one): the script's one duplicate (a repair that
# repeats an earlier candidate) costs the tenth call.
PROPOSALS = MAX_CANDIDATES + 1


def _t(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, trials=5, method="fake")


class TagSandbox:
    """Verdicts by the VARIANT tag; optionally hangs on the `block_at`-th evaluation."""

    def __init__(self, block_at: int = 0, marker: Path | None = None) -> None:
        self.n, self.block_at, self.marker = 0, block_at, marker

    def evaluate(self, problem, candidate, config) -> Evaluation:  # noqa: ANN001
        self.n += 1
        if self.n == self.block_at:
            assert self.marker is not None
            self.marker.write_text(str(self.n))
            time.sleep(600)
        tag = re.search(r"VARIANT = '(\w+)'", candidate.source).group(1)
        base = dict(candidate_id=candidate.id, problem_id=problem.id, ref_timing=_t(1.0))
        if tag == "wrong":
            return Evaluation(outcome=Outcome.INCORRECT, reason="incorrect: max error 1.0", **base)
        if tag == "cerr":
            return Evaluation(outcome=Outcome.COMPILE_ERROR, reason="compile_error: build failed", **base)
        speedup = float(tag[3:].replace("_", "."))
        return Evaluation(outcome=Outcome.OK, reason="ok", timing=_t(1.0 / speedup), **base)


def config(runs: Path, ingest: str | None = None) -> OptimizeConfig:
    return OptimizeConfig(llm=LLMConfig(provider="scripted", model="fake"), runs_dir=runs, archive_ingest=ingest,
                          sandbox=SandboxConfig(device="cpu", seed=1),
                          evolution=EvolutionConfig(islands=1, jobs_per_generation=1, concurrency=1, seed=7),
                          stop=StopConfig(max_candidates=PROPOSALS, patience=20))


def run_as_configured(runs: Path, db_url: str, mode: str) -> Result:
    """The way the CLI runs it: the mode in the config, the archive at a URL (opened with MiniLM)."""
    return run_optimize(PROBLEM, config(runs, mode), llm=ScriptedLLM(SCRIPT), sandbox=TagSandbox(), retriever=None,
                        archive_url=db_url)


class PersistentScript(ScriptedLLM):
    """The script, continued across processes: where each rule stands is saved in RUNS_DIR/script.json after
    every call and read back on --resume, so a resumed run is not answered with replies it already had (a
    real LLM does not replay its answers, and each repeat would now spend the budget as a duplicate)."""

    def __init__(self, state: Path, resume: bool) -> None:
        super().__init__(SCRIPT)
        self.state = state
        if resume and state.exists():
            self._next = json.loads(state.read_text())

    def complete(self, messages, **opts):  # noqa: ANN001, ANN003, ANN201
        out = super().complete(messages, **opts)
        with self._lock:
            self.state.write_text(json.dumps(self._next))
        return out


def run(runs: Path, db_url: str, mode: str, block_at: int = 0, resume: str | None = None) -> Result:
    archive = Archive(db_url, embedder=HashingEmbedder())
    runs.mkdir(parents=True, exist_ok=True)
    try:
        return run_optimize(None if resume else PROBLEM, config(runs),
                            llm=PersistentScript(runs / "script.json", resume is not None),
                            sandbox=TagSandbox(block_at, runs / "blocked"), resume=resume, retriever=None,
                            storer=Ingestor(archive, mode, run_kind="optimize"))
    finally:
        archive.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("db")
    ap.add_argument("mode")
    ap.add_argument("--block-at", type=int, default=0)
    ap.add_argument("--resume")
    a = ap.parse_args()
    print(run(a.runs, a.db, a.mode, a.block_at, a.resume).run_id)
