"""A new user's first hour (issue 16), run by CI in a venv installed exactly as README's main-job command says.

Runs the main job and each subcommand's most common invocation as far as this machine allows; each must
end in a result (exit 0; for optimize and bench also 4, nothing faster than eager, or 5, nothing correct: honest
answers) or in one `error: …` line (exit 1 or 2), never a traceback. The LLM is the
project's fake server on 127.0.0.1 (tests/integration/fake_llm_server.py), replying with a C++ kernel.

    python scripts/ci_first_hour.py        # with the venv under test active; exits 1 if any check fails
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from fake_llm_server import FakeLLMServer  # noqa: E402


# optimize's and bench's documented answers besides 0 (kevolve.records.Answer): nothing faster than eager, nothing
# correct. The fake server's C++ ReLU may not beat eager on a CPU.
ANSWERS = (4, 5)


@dataclass(frozen=True)
class Check:
    """One command line, and whether it must give a result (exit 0) or may end in a one-line error."""

    name: str
    args: tuple[str | Callable[[], str], ...]  # a callable: a value an earlier check makes (a run's folder)
    result: bool  # True: must give a result (ANSWERS); False: exit 1/2 with exactly one `error:` line is fine too
    timeout_s: float = 600.0


def verdict(c: Check, rc: int, out: str, err: str) -> str | None:
    """Why the run of `c` fails the first-hour rule, or None."""
    if "Traceback (most recent call last)" in out + err:
        return "printed a traceback"
    if rc == 0 or (rc in ANSWERS and c.args[:1] in (("optimize",), ("bench",))):
        return None
    if c.result:
        return f"exit {rc}, a result was expected"
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    if rc not in (1, 2) or len(errors) != 1 or not err.rstrip().splitlines()[-1].startswith("error: "):
        return f"exit {rc} without exactly one closing `error: …` line"
    return None


def run(c: Check, env: dict[str, str], cwd: Path) -> str | None:
    t0 = time.monotonic()
    try:
        args = [a() if callable(a) else a for a in c.args]
        p = subprocess.run(["kevolve", *args], env=env, cwd=cwd, capture_output=True, text=True,
                           timeout=c.timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        print(f"FAIL {c.name}: no end within {c.timeout_s:.0f} s", flush=True)
        return "timeout"
    why = verdict(c, p.returncode, p.stdout, p.stderr)
    last = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or [""])[-1][:160]
    print(f"{'FAIL' if why else 'ok  '} {c.name} (exit {p.returncode}, {time.monotonic() - t0:.0f} s): "
          f"{why or last}", flush=True)
    if why:
        print(f"--- stdout\n{p.stdout[-3000:]}\n--- stderr\n{p.stderr[-3000:]}", flush=True)
    return why


def checks(work: Path) -> list[Check]:
    relu, sol = str(FIX / "problems" / "relu.py"), str(FIX / "solutions" / "relu_cpp.py")
    bench = ("bench", "--suite", str(FIX / "suite"), "--level", "1", "--problems", "1",
             "--solutions", str(FIX / "suite_solutions"), "--run-dir", str(work / "bench"), "--trials", "5",
             "--max-timing-s", "0.5")
    config = work / "settings.toml"  # kevolve.toml's form under another name (main writes it): only this check reads it
    return [
        Check("help", ("--help",), True),
        # README's main job, verbatim: needs an NVIDIA GPU, so on CI it is one line saying what works instead
        Check("optimize (README, --offline)",
              ("optimize", str(FIX / "problems" / "fused_chain.py"), "--offline", "--max-candidates", "8"), False),
        # the main job as far as a CPU goes: an LLM (the fake server) writes C++ kernels; archive on
        Check("optimize --device cpu --llm", ("optimize", relu, "--device", "cpu", "--llm", "openai:gpt-4o",
                                              "--max-candidates", "2", "--patience", "1", "--runs-dir",
                                              str(work / "runs")), True),
        # the loop with recorded replies and every hard budget a user may set (issue 37)
        Check("optimize --llm demo, budgets", ("optimize", relu, "--llm", "demo", "--device", "cpu", "--max-candidates",
                                               "3", "--budget-tokens", "200000", "--budget-device", "20m",
                                               "--runs-dir", str(work / "demo-runs")), True),
        # resuming the run just made, by its folder (a finished run ends again: its winners audited anew)
        Check("optimize --resume", ("optimize", "--resume", lambda: str(only_run(work / "demo-runs"))), True),
        Check("optimize, no such file", ("optimize", str(work / "nope.py"), "--device", "cpu"), False),
        Check("optimize --graph", ("optimize", "--graph"), True),
        Check("eval", ("eval", relu, sol, "--device", "cpu", "--trials", "5"), True),
        Check("eval, settings from a config file", ("--config", str(config), "eval", relu, sol), True),
        Check("bench", bench, True),
        Check("bench --executor ray", (*bench, "--executor", "ray"), False),
        Check("archive search", ("archive", "search", "relu"), True),
        Check("archive show", ("archive", "show", "0123456789abcdef"), False),
        Check("archive export jsonl", ("archive", "export", str(work / "k.jsonl")), True),
        Check("archive export parquet", ("archive", "export", str(work / "k.parquet")), False),
        Check("archive import", ("archive", "import", str(work / "k.jsonl")), True),
        Check("doctor", ("doctor",), True),
        Check("sandbox status", ("sandbox", "status"), True),
        # under the test suite's tag: the suite (which CI runs next, from the same source and torch) then finds the
        # image built and reuses it, instead of building and storing a second 1.1 GB image (CI's disk and ~1 min)
        Check("sandbox build-image", ("sandbox", "build-image", "--tag", "kevolve-eval:test"), False),
        Check("sandbox prune", ("sandbox", "prune"), False),
        # the warm judge service the two evals above started (and left to idle): shown, then stopped before the
        # work folder (its cache) goes
        Check("sandbox warm-status", ("sandbox", "warm-status"), True),
        Check("sandbox warm-stop", ("sandbox", "warm-stop"), True),
    ]


def only_run(runs: Path) -> Path:
    """The one run folder under `runs` (an earlier check made it), or a path that is not there if none is."""
    found = sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
    return found[0] if len(found) == 1 else runs / "no-single-run-here"


def lanes_of(all_checks: list[Check]) -> tuple[list[Check], list[Check]]:
    """(optimize and the archive, everything else): no check of one lane needs anything of the other's."""
    first = [c for c in all_checks if c.args[:1] in (("optimize",), ("archive",), ("--help",))]
    return first, [c for c in all_checks if c not in first]


def serve_starts(env: dict[str, str], cwd: Path) -> str | None:
    """`kevolve archive serve` runs until stopped: it must start (and print where) within 60 s."""
    p = subprocess.Popen(["kevolve", "archive", "serve", "--port", "0"], env=env, cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        out, err = p.communicate(timeout=60)
        why = verdict(Check("archive serve", (), False), p.returncode or 0, out, err) or "exited"
    except subprocess.TimeoutExpired:
        p.terminate()
        out, err = p.communicate(timeout=30)
        why = None if "serving " in out and "Traceback" not in out + err else "did not say where it serves"
    print(f"{'FAIL' if why else 'ok  '} archive serve: {why or out.strip().splitlines()[0][:160]}", flush=True)
    return why


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="kevolve-first-hour-"))
    reply = f"Here is a kernel.\n\n```python\n{(FIX / 'solutions' / 'relu_cpp.py').read_text()}```\n"
    server = FakeLLMServer(default=reply).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "KEVOLVE_"))}
    env.update(KEVOLVE_HOME=str(work / "home"), KEVOLVE_CACHE_DIR=str(work / "cache"), OPENAI_API_KEY="sk-ci",
               OPENAI_BASE_URL=server.openai_url, NO_COLOR="1")
    (work / "settings.toml").write_text('[eval]\ndevice = "cpu"\ntrials = 5\n')
    try:
        # two lanes, one per core of CI's machine, each in its order: what an LLM writes and the archive it fills;
        # what evaluates and the sandbox (the warm service its evals start). 22 checks one after another: 289 s.
        with ThreadPoolExecutor(2) as pool:
            lanes = pool.map(lambda lane: [c.name for c in lane if run(c, env, work)], lanes_of(checks(work)))
            failed = [name for lane in lanes for name in lane]
        failed += ["archive serve"] if serve_starts(env, work) else []
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"first hour: {len(failed)} of {len(checks(work)) + 1} checks failed{': ' if failed else ''}"
          f"{', '.join(failed)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
