"""Every command README.md and docs/ show in a code block or name complete in prose runs here, as written, on a CPU,
or is listed in SKIP with why not (issue 37: "every doc command runs"; tests/unit/test_doc_commands.py parses each
against the CLI). docs/BENCHMARKS.md is left out: a record of measurements made, most on an H100, not instructions.

A placeholder gets a value made here (FILLS: the fixture ReLU for PROBLEM.py, a folder of KernelBench-layout fixture
problems for ~/KernelBench, the run the demo made for its run id, …), an optional `[…]` part is left out, and
nothing else changes: the flags are the doc's. All run one after another in one folder with one $HOME (so one
archive), in doc order where a later command needs what an earlier one made (the archive commands read what
`--llm demo` stored, `bench compare` the two bench runs). The demo is stopped by SIGINT after three evaluations and
finished by the doc's `--resume` line: both documented commands, at the cost of one run.

What each must give is the doc's own claim: a result (exit 0, or an answer optimize and bench document: 4 nothing
faster than eager), the demo's story as docs/optimize.md tells it, the archive's rows going out and back in.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from archive_server import free_port
from testpaths import BUILD_CACHE, FIXTURES

pytestmark = pytest.mark.slow  # builds the demo's C++ extensions: 2.3 min with a warm build cache, 4.9 min cold (2 cores)
ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "BENCHMARKS.md")]
STARTS = ("kevolve ", "python ", "python3 ", "pip ", "vllm ")


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """(info string, lines) of each fenced block."""
    out: list[tuple[str, list[str]]] = []
    info, lines = None, []
    for line in text.splitlines():
        if m := re.match(r"\s*```\s*(\S*)", line):
            if info is None:
                info, lines = m.group(1), []
            else:
                out.append((info, lines))
                info = None
        elif info is not None:
            lines.append(line)
    return out


def fenced_commands(text: str) -> list[str]:
    """Command lines of shell (or untagged) blocks, continuations joined, comments cut; a python block by its first
    line ("python: …")."""
    found = []
    for info, lines in _blocks(text):
        if info == "python":
            found.append(f"python: {lines[0].strip()}")
        if info not in ("", "bash", "sh", "console"):
            continue
        joined: list[str] = []
        for line in lines:  # `\` continues a line; an indented `[` continues a synopsis
            if joined and (joined[-1].endswith("\\") or (joined[-1].startswith("kevolve ") and re.match(r"\s+\[", line))):
                joined[-1] = f"{joined[-1].rstrip(chr(92)).rstrip()} {line.strip()}"
            else:
                joined.append(line.strip())
        cmds = (re.sub(r"\s+#.*$", "", line.removeprefix("$ ")).strip() for line in joined)
        found += [c for c in cmds if c.startswith(STARTS) or re.match(r"[A-Z_]+=\S*\s", c)]
    return found


def prose_commands(text: str) -> list[str]:
    """`kevolve …` in inline code outside the fenced blocks."""
    prose, inside = [], False
    for line in text.splitlines():
        if re.match(r"\s*```", line):
            inside = not inside
        elif not inside:
            prose.append(line)
    return [" ".join(c.replace("\\|", "|").split()) for c in re.findall(r"`(kevolve [^`]+)`", "\n".join(prose))]


def doc_commands() -> dict[str, str]:
    """Every command of the docs -> the first doc that shows it."""
    found: dict[str, str] = {}
    for doc in DOCS:
        text = doc.read_text()
        for c in fenced_commands(text) + prose_commands(text):
            found.setdefault(c, doc.name)
    return found


GPU, KEY, NET = "needs an NVIDIA GPU", "needs an LLM API key or server", "needs the network"
NAME = "a command named in prose, not a line to run (its full forms are run)"
SKIP = {
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[cuda]' && kevolve optimize "
    "tests/fixtures/problems/fused_chain.py --offline --max-candidates 8": f"{NET} (pip) and {GPU} (--offline); "
    "CI installs this way and scripts/ci_first_hour.py checks the optimize's one-line answer on a CPU",
    "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 -e '.[test]' && python -m pytest -q "
    "-n 2 --dist loadfile": f"{NET} (pip); the test suite itself, which CI runs (.ci/run)",
    "kevolve optimize tests/fixtures/problems/small_resnet.py --offline --max-candidates 3": GPU,
    "kevolve optimize FILE --device cpu --llm PROVIDER:MODEL": f"{KEY} (the loop on a CPU without one: --llm demo, "
                                                              "run below)",
    "kevolve optimize model.py --llm openai:gpt-4o --archive-ingest winners": KEY,
    "kevolve bench --suite ~/KernelBench --level 1 --solutions DIR --archive-ingest all --archive-db "
    "postgresql+psycopg://u:pw@host/db": "needs a PostgreSQL server (tests/integration/test_archive_postgres.py)",
    "kevolve bench --suite ~/KernelBench --level 1,2 --solutions DIR --gpus 0,1": f"{GPU} (two)",
    "kevolve optimize problem.py --offline --device cuda --budget 12": GPU,
    "kevolve optimize problem.py --llm openai:gpt-4o": KEY,
    "python scripts/run_offline_gpu.py --suite ~/KernelBench --sample 30 --out runs/offline_h100": GPU,
    "kevolve optimize model.py --llm anthropic:claude-sonnet-4-6 --budget '$5,40,30m'": KEY,
    "kevolve optimize resnet.py --parts --llm openai:gpt-4o --budget 8": KEY,
    "kevolve optimize mylib/layers.py:FusedMLP --init '1024, 4096' --input 'float16[64,1024]' --llm openai:gpt-4o": KEY,
    "kevolve optimize mypkg.layers:FusedMLP --init '1024, 4096' --input 'float16[64,1024]' --llm "
    "vllm:Qwen/Qwen2.5-Coder-32B-Instruct": KEY,
    "kevolve optimize model.py --llm openai:gpt-4o --language triton": f"{KEY}; {GPU} (Triton)",
    "python: import kevolve": KEY,
    "python scripts/fetch_replay_corpus.py --source PATH_TO_LEADERBOARD_CHECKOUT": f"{NET} (a checkout of the "
                                                                                   "KernelBench leaderboard)",
    "python scripts/replay_server.py --port 8765 &": f"{NET}: serves the corpus the line above fetches",
    "kevolve bench --suite KernelBench --level 1,2 --problems 1-30 --optimize --llm compatible:replay --base-url "
    "http://127.0.0.1:8765/v1 --budget 8": f"{NET}: the replay server above, KernelBench's problems",
    "vllm serve Qwen/Qwen2.5-Coder-32B-Instruct --port 8000 &": f"{GPU} and {NET} (the model's weights)",
    "kevolve optimize model.py --llm vllm:Qwen/Qwen2.5-Coder-32B-Instruct --budget 8": KEY,
    "kevolve optimize model.py --llm compatible:MODEL --base-url http://HOST:PORT/v1": KEY,
    "OPENAI_API_KEY=… kevolve optimize model.py --llm openai:gpt-4.1 --budget '8,$1'": KEY,
    "ANTHROPIC_API_KEY=… kevolve bench --suite KernelBench --level 1 --problems 1-10 --optimize --llm "
    "anthropic:claude-sonnet-4-6 --budget 8": KEY,
    "pip wheel --no-deps -w .whl .": f"{NET}: a GPU machine's wheels, made for the device call below",
    "pip download --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 "
    "--platform manylinux_2_17_x86_64 -d .whl langgraph langgraph-checkpoint-sqlite": NET,
    "python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && PYTHONPATH=/tmp/site python3 -P "
    "scripts/run_optimize_gpu.py --kernelbench runs/kernelbench-upstream --out $OUT/optimize": GPU,
    "python: Language(\"toy\", \"@toy_dsl.kernel functions, compiled at their first launch\", gpu_only=True,":
        "an example registry entry for a language that does not exist",
    "kevolve sandbox build-image": "needs Docker", "kevolve eval --sandbox docker": "needs Docker",
    "kevolve sandbox prune [--all]": "needs Docker (runner containers)", "kevolve sandbox prune": "needs Docker",
    "kevolve bench --optimize --language triton": f"{GPU} and {KEY}", "kevolve optimize --offline": GPU,
    "kevolve archive serve": "the ARCHIVE.md line with --port runs (this one binds the default port)",
    **dict.fromkeys(["kevolve eval", "kevolve bench", "kevolve archive", "kevolve optimize", "kevolve bench baselines",
                     "kevolve bench --device cpu", "kevolve bench --suite DIR", "kevolve bench baselines --out",
                     "kevolve archive serve | search | show | export | import"], NAME),
}


@dataclass
class Made:
    """What earlier commands made, for later ones' placeholders."""

    work: Path
    env: dict[str, str]
    port: int = 0
    run: Path | None = None  # the demo's run folder
    kernel: str = ""  # an archived kernel's id
    exported: int = -1
    bench_runs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Step:
    """One doc command: its placeholders' values, its environment, and what its result must show."""

    command: str
    check: Callable[[Ran, Made], None]
    fill: Callable[[Made], dict[str, str]] = lambda m: {}
    env: Callable[[Made], dict[str, str]] = lambda m: {}
    run: Callable[[Step, Made], Ran] | None = None  # how it runs, where it is not one process to its end


def argv(step: Step, made: Made) -> tuple[list[str], dict[str, str]]:
    """The command's words with placeholders filled and optional parts left out, and its environment."""
    fills = {"~/KernelBench": str(made.work / "KernelBench"), "DIR": str(made.work / "my_samples"),
             "runs/my_samples": str(made.work / "my_samples"), "PROBLEM.py": str(FIXTURES / "problems" / "relu.py"),
             "SOLUTION.py": str(FIXTURES / "solutions" / "relu_cpp.py"), "path/to/problem.py":
             str(FIXTURES / "problems" / "relu.py"), "FILE": str(made.work / "kevolve-example.toml"),
             **step.fill(made)}
    words = [w2 for w in shlex.split(re.sub(r"\s*\[[^\]]*\]", "", step.command))
             for w2 in (fills[w].split(" ") if w == "…" else [fills.get(w, w)])]
    env = {**made.env, **step.env(made)}
    while re.match(r"[A-Z_]+=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    head = {"kevolve": [sys.executable, "-m", "kevolve.cli"], "python": [sys.executable]}[words[0]]
    return head + words[1:], env


def run_to_end(step: Step, made: Made) -> Ran:
    args, env = argv(step, made)
    p = subprocess.run(args, env=env, cwd=made.work, capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL)
    return Ran(p.returncode, p.stdout, p.stderr)


def demo_until_three_evaluations(step: Step, made: Made) -> Ran:
    """The demo, stopped as Ctrl-C stops it once three evaluations are in (its resume line is the next step)."""
    args, env = argv(step, made)
    p = subprocess.Popen(args, env=env, cwd=made.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 600
    while p.poll() is None and time.monotonic() < deadline:
        runs = sorted((made.work / "runs").glob("relu-*/trials.jsonl"))
        if runs and len(runs[0].read_text().splitlines()) >= 3:
            made.run = runs[0].parent
            p.send_signal(signal.SIGINT)
            break
        time.sleep(0.5)
    out, err = p.communicate(timeout=600)
    return Ran(p.returncode, out, err)


def serve_and_read(step: Step, made: Made) -> Ran:
    """The server, asked for its page and its counts, then stopped."""
    made.port = free_port()
    args, env = argv(step, made)
    p = subprocess.Popen(args, env=env, cwd=made.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base, got = f"http://127.0.0.1:{made.port}", ""
    try:
        for _ in range(120):
            try:
                stats = json.loads(urllib.request.urlopen(f"{base}/api/stats", timeout=5).read())
                page = urllib.request.urlopen(f"{base}/", timeout=5).read().decode()
                got = json.dumps({"stats": stats, "page": page[:2000]})
                break
            except OSError:
                if p.poll() is not None:
                    break
                time.sleep(0.5)
    finally:
        p.terminate()
        out, err = p.communicate(timeout=30)
    return Ran(0 if got else 1, f"{got}\n{out}", err)


def answer(r: Ran, _m: Made) -> None:
    """A result: exit 0, or optimize's and bench's documented 4 (nothing faster than eager) with its line."""
    assert r.code in (0, 4) and "Traceback" not in r.err, f"exit {r.code}: {r.err[-3000:]}"
    assert r.code == 0 or "nothing beat eager" in r.out + r.err, r.err[-2000:]


def bench_run(r: Ran, m: Made) -> None:
    answer(r, m)
    m.bench_runs.append(re.search(r"results\.json: (\S+)/results\.json", r.out + r.err).group(1))


def bench_run_fresh(r: Ran, m: Made) -> None:
    bench_run(r, m)
    assert re.search(r"\b1 evaluation\(s\) to go", r.out), r.out[-2000:]


def demo_stopped(r: Ran, m: Made) -> None:
    assert m.run is not None and r.code == 130, f"exit {r.code}: {r.err[-3000:]}"
    assert "--resume" in r.err.strip().splitlines()[-1] and not (m.run / "result.json").exists()


def demo_story(r: Ran, m: Made) -> None:
    """docs/optimize.md's account of the demo: the first draft does not compile and is repaired, the mutation that
    calls PyTorch's ReLU is rejected (no_custom_kernel), duplicates skipped, the winner audited, the honest answer."""
    answer(r, m)
    assert m.run is not None
    result = json.loads((m.run / "result.json").read_text())
    trials = [json.loads(x) for x in (m.run / "trials.jsonl").read_text().splitlines()]
    assert result["proposals"] == len(trials) == 8 and result["stop_reason"].startswith("max_candidates"), result
    assert any(t["outcome"] == "compile_error" for t in trials) and any(
        t["operator"] == "repair" and t["outcome"] == "ok" for t in trials), trials
    assert any(t["reason"].startswith("no_custom_kernel") for t in trials), trials
    assert any(t["status"] == "duplicate" for t in trials) and "## Audit" in (m.run / "report.md").read_text()
    assert result["answer"] == ("improved" if r.code == 0 else "not_faster"), result["answer"]


def ok_exit(r: Ran, _m: Made) -> None:
    assert r.code == 0 and "Traceback" not in r.err, f"exit {r.code}: {r.out[-1500:]} {r.err[-3000:]}"


def found_relu(r: Ran, m: Made) -> None:
    ok_exit(r, m)
    rows = [json.loads(x) for x in r.out.splitlines() if x.startswith("{")]
    assert rows and all(row["problem_name"] == "relu" for row in rows), r.out[-2000:]
    m.kernel = rows[0]["id"]


def exported(r: Ran, m: Made) -> None:
    ok_exit(r, m)
    m.exported = int(re.search(r"exported (\d+) kernels", r.out + r.err).group(1))
    assert m.exported >= 4 and (m.work / "all.parquet").stat().st_size > 0


def imported(least: Callable[[Made], int]) -> Callable[[Ran, Made], None]:
    def check(r: Ran, m: Made) -> None:
        ok_exit(r, m)
        new = int(re.search(r"(\d+) new kernels", r.out + r.err).group(1))
        assert new >= least(m) > 0, r.out + r.err
    return check


def served(r: Ran, m: Made) -> None:
    assert r.code == 0, r.err[-3000:]
    got = json.loads(r.out.splitlines()[0])
    assert got["stats"]["kernels"] >= m.exported > 0 and "<html" in got["page"].lower(), got["stats"]


def says(*words: str) -> Callable[[Ran, Made], None]:
    def check(r: Ran, m: Made) -> None:
        ok_exit(r, m)
        assert all(w in r.out for w in words), r.out[-2000:]
    return check


SNIPPET_PRE = """import sys
from pathlib import Path
from kevolve.contract import load_problem
from kevolve.runfiles import RunFiles
run = Path(sys.argv[1])
problem = load_problem(run / "problem.py")
saved = next(s for _, s in RunFiles(run, problem.id).saved() if s.evaluation is not None and s.evaluation.ok)
candidate, evaluation = saved.candidate, saved.evaluation
"""


def snippet(step: Step, made: Made) -> Ran:
    """docs/ARCHIVE.md's Python lines as written, `problem`, `candidate`, `evaluation` bound to the demo's records."""
    block = next("\n".join(lines) for info, lines in _blocks((ROOT / "docs" / "ARCHIVE.md").read_text())
                 if info == "python" and f"python: {lines[0].strip()}" == step.command)
    script = made.work / "archive_snippet.py"
    script.write_text(f"{SNIPPET_PRE}{block}\nprint(len(hits), [h.problem_name for h in hits])\n")
    p = subprocess.run([sys.executable, str(script), str(made.run)], env=made.env, cwd=made.work,
                       capture_output=True, text=True, timeout=300)
    return Ran(p.returncode, p.stdout, p.stderr)


def retrieved(r: Ran, m: Made) -> None:
    ok_exit(r, m)
    assert int(r.out.split()[0]) >= 1 and "relu" in r.out, r.out


STEPS = [
    Step("kevolve doctor", ok_exit),
    Step("kevolve optimize --graph", says("retrieve", "-->")),
    Step("kevolve --config FILE …", says("-->"), fill=lambda m: {"…": "optimize --graph"}),
    Step("kevolve --config FILE optimize …", says("-->"), fill=lambda m: {"…": "--graph"}),
    Step("kevolve eval PROBLEM.py SOLUTION.py [--device cuda|cpu] [--timeout S] [--trials N] [--json] [--ncu] [--audit] "
         "[--timings] [--allow CATEGORY] [--max-slowdown X] [--no-warm] [--compile-baseline auto|on|off] "
         "[--baselines reuse|live]", says("ok: correct on every call")),
    Step("kevolve sandbox status", ok_exit),
    Step("kevolve sandbox warm-status [--json]", says("pid ")),  # the eval above started it
    Step("kevolve sandbox warm-stop", says("stopped 1 ")),
    Step("kevolve optimize tests/fixtures/problems/relu.py --llm demo --device cpu --max-candidates 8", demo_stopped,
         run=demo_until_three_evaluations),
    Step("kevolve optimize --resume relu-20261122-011107-c9d5", demo_story,
         fill=lambda m: {"relu-20261122-011107-c9d5": m.run.name if m.run else "no-run"}),
    Step('kevolve archive search "warp shuffle softmax" -k 5 --level 1 --technique warp_shuffle --min-speedup 1.5',
         ok_exit),
    Step("kevolve archive search path/to/problem.py --json", found_relu),
    Step("kevolve archive show 3f2a9c1d", says("class ModelNew"), fill=lambda m: {"3f2a9c1d": m.kernel[:8]}),
    Step("kevolve archive export all.parquet", exported),
    Step("kevolve archive import sakana_level1.parquet", imported(lambda m: m.exported),
         fill=lambda m: {"sakana_level1.parquet": "all.parquet"},
         env=lambda m: {"KEVOLVE_DB": f"sqlite:///{m.work / 'imported.db'}"}),
    Step("kevolve archive import RUN_FOLDER", imported(lambda m: 1), fill=lambda m: {"RUN_FOLDER": str(m.run)},
         env=lambda m: {"KEVOLVE_DB": f"sqlite:///{m.work / 'from_run.db'}"}),
    Step("python: from kevolve.archive import retrieve, open_archive", retrieved, run=snippet),
    Step("KEVOLVE_API_TOKEN=secret kevolve archive serve --port 8765", served, fill=lambda m: {"8765": str(m.port)},
         run=serve_and_read),
    Step("kevolve bench --suite ~/KernelBench --level 1 --problems 1-20 --solutions runs/my_samples", bench_run),
    # before README's line, which names the same run folder and then finds its evaluation done
    Step("kevolve bench --suite ~/KernelBench --level 1 --solutions DIR --executor ray [--address HOST:6379]",
         bench_run_fresh),
    Step("kevolve bench --suite KERNELBENCH_DIR --level 1 --solutions DIR", bench_run,
         fill=lambda m: {"KERNELBENCH_DIR": str(m.work / "KernelBench")}),
    Step("kevolve bench baselines --suite ~/KernelBench --level 1,2 [--published DIR --out base.json]",
         says("eager")),
    Step("kevolve bench compare runs/RUN_A runs/RUN_B", says("same"),
         fill=lambda m: dict(zip(["runs/RUN_A", "runs/RUN_B"], m.bench_runs[:1] + m.bench_runs[-1:], strict=False))),
    Step("python scripts/offline_coverage.py --suite ~/KernelBench --jobs 2", says("covered")),
]


def _folder(work: Path) -> dict[str, str]:
    """The folder the commands run in, as a user's would be; their environment."""
    for level, names in {"level1": ["1_ReLU.py", "2_Sigmoid.py"], "level2": ["2_Add_Mul.py"]}.items():
        (work / "KernelBench" / level).mkdir(parents=True)  # ~/KernelBench: the layout, fixture problems
        for name in names:
            shutil.copy(FIXTURES / "suite" / level / name, work / "KernelBench" / level / name)
    (work / "my_samples").mkdir()  # runs/my_samples and DIR: one sample, the ReLU's
    shutil.copy(FIXTURES / "suite_solutions" / "level_1_problem_1_sample_0_kernel.py", work / "my_samples")
    toml = next("\n".join(lines) for info, lines in _blocks((ROOT / "docs" / "optimize.md").read_text()) if info == "toml")
    (work / "kevolve-example.toml").write_text(toml)  # FILE: the config file docs/optimize.md shows
    for name in ("tests", "scripts"):  # the docs' paths are relative to a checkout
        (work / name).symlink_to(ROOT / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "KEVOLVE_", "XDG_RUNTIME"))}
    env.update(HOME=str(work / "home"), KEVOLVE_HOME=str(work / "home" / ".kevolve"), NO_COLOR="1", COLUMNS="200",
               KEVOLVE_CACHE_DIR=str(BUILD_CACHE))  # the tests' builds: the sample's extension is built there
    if os.environ.get("KEVOLVE_BWRAP"):
        env["KEVOLVE_BWRAP"] = os.environ["KEVOLVE_BWRAP"]
    return env


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory, shared_pch: None) -> dict[str, str | None]:
    """Every step in order: why its command failed its check, or None."""
    work = tmp_path_factory.mktemp("docs")
    made = Made(work, _folder(work))
    why: dict[str, str | None] = {}
    try:
        for step in STEPS:
            t0 = time.monotonic()
            try:
                step.check((step.run or run_to_end)(step, made), made)
                why[step.command] = None
            except Exception as e:  # noqa: BLE001 - each command's failure is its own test's
                why[step.command] = f"{type(e).__name__}: {str(e)[-4000:]}"
            print(f"{time.monotonic() - t0:6.1f} s  {step.command[:100]}")
    finally:  # a warm judge the eval started, should warm-stop have failed
        subprocess.run([sys.executable, "-m", "kevolve.cli", "sandbox", "warm-stop"], env=made.env, cwd=work,
                       capture_output=True, timeout=120)
    return why


def test_every_doc_command_runs_here_or_says_why_not() -> None:
    documented, planned = doc_commands(), [s.command for s in STEPS]
    assert len(documented) > 50 and len(set(planned)) == len(planned) and not set(planned) & set(SKIP)
    assert sorted(set(documented) - set(planned) - set(SKIP)) == []  # new in the docs: run it here, or say why not
    assert sorted((set(planned) | set(SKIP)) - set(documented)) == []  # no longer in the docs


@pytest.mark.parametrize("command", [s.command for s in STEPS], ids=lambda c: c[:60])
def test_the_doc_command_runs(command: str, ran: dict[str, str | None]) -> None:
    assert ran[command] is None, f"{doc_commands().get(command)}: `{command}`: {ran[command]}"
