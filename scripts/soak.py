"""Soak the sandbox: evaluate N mixed hostile and honest candidates in a row and count failures.

    python scripts/soak.py --n 1000 --backend docker            # or --backend local (bubblewrap)
    python -P scripts/soak.py --device cuda --n 220 --max-minutes 7.5 --out soak_gpu.jsonl
                                                                # a GPU: KEVOLVE_BWRAP for a bwrap off PATH

Candidates come from tests/adversarial/hostile (Python-only; relu problem, allow_torch_only), a few
plain crashes, and on a GPU tests/gpu/solutions (honest CuPy kernels, an illegal address, a kernel
that never ends, device OOM). Reports, as JSON (and a markdown table with --markdown):
- orchestrator deaths: the evaluating process died or evaluate() raised (goal 0). The evaluations
  run in a child process that appends each verdict to a JSONL file; the parent restarts it after
  a death and carries on with the next candidate.
- the verdict table: per kind, the expected (outcome, reason code) and what came back (goal: all).
- leftovers: processes still running with this soak's marker in their environment once the
  orchestrator has gone (daemons, runners), and files written outside the sandbox (goal 0).
- worker restart time: from asking for a fresh worker to that worker waiting warm for its job.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "adversarial" / "hostile"
GPU_SOLUTIONS = ROOT / "tests" / "gpu" / "solutions"
PROBLEM = ROOT / "tests" / "fixtures" / "problems" / "relu.py"
MARK_VAR = "SOAK_RUN"  # set in the orchestrator: every process it starts inherits it, the daemon's too
SECRET = "sk-soak-not-a-real-key"

_EXTRA = {
    "segfaults": "import ctypes\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                 "    def forward(self, x):\n        ctypes.string_at(0)\n",
    "exits": "import os\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
             "    def forward(self, x):\n        os._exit(3)\n",
    "wrong": "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2\n",
    "kills_parent": "import os, signal, torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                    "    def forward(self, x):\n        try:\n            os.kill(os.getppid(), signal.SIGKILL)\n"
                    "        except OSError:\n            pass\n        return torch.relu(x)\n",
    # the orchestrator holds OPENAI_API_KEY=SECRET: wrong results if the worker can see it anywhere
    "reads_secret_env": "import os, torch\nimport torch.nn as nn\n\nSEEN = any('sk-soak' in v for v in os.environ.values())\n\n"
                        "class ModelNew(nn.Module):\n    def forward(self, x):\n"
                        "        return x.clone() if SEEN else torch.relu(x)\n",
}
# kind -> (expected outcome, expected reason code, weight in the mix, config overrides)
KINDS: dict[str, tuple[str, str, int, dict]] = {
    "honest": ("ok", "ok", 12, {}),
    "reads_secrets": ("ok", "ok", 2, {}),
    "reads_secret_env": ("ok", "ok", 2, {}),
    "writes_outside_scratch": ("ok", "ok", 2, {}),
    "opens_socket": ("ok", "ok", 2, {}),
    "starts_daemon": ("ok", "ok", 2, {}),
    "kills_parent": ("ok", "ok", 2, {}),
    "wrong": ("incorrect", "incorrect", 2, {}),
    "segfaults": ("crashed", "signal", 2, {}),
    "exits": ("crashed", "exit", 2, {}),
    "fork_bomb": ("runtime_error", "runtime_error", 1, {}),  # default pids limit (512)
    "fills_disk": ("crashed", "disk_limit", 1, {"scratch_limit_gb": 0.25}),
    "allocates_all_memory": ("crashed", "memory_limit", 1, {"memory_limit_gb": 2.0}),
    "spins_forever": ("timeout", "timeout", 1, {"timeout_s": 20.0}),
}
# On a GPU, besides the above: CUDA kernels, honest and not (tests/gpu/solutions).
GPU_KINDS: dict[str, tuple[str, str, int, dict]] = {
    "relu_cupy": ("ok", "ok", 10, {}),
    "illegal_address": ("crashed", "cuda_error", 3, {}),
    "kernel_never_ends": ("timeout", "timeout", 1, {"timeout_s": 8.0}),
    "device_oom": ("runtime_error", "runtime_error", 2, {}),  # reason: forward raised OutOfMemoryError
    "fork_bomb": ("runtime_error", "runtime_error", 1, {"timeout_s": 20.0}),
    "allocates_all_memory": ("crashed", "memory_limit", 1, {"memory_limit_gb": 5.0}),  # a CUDA runner starts bigger
    "spins_forever": ("timeout", "timeout", 1, {"timeout_s": 8.0}),
}


def kinds_for(device: str) -> dict[str, tuple[str, str, int, dict]]:
    return {**KINDS, **GPU_KINDS} if device.startswith("cuda") else KINDS


def write_targets(out: Path) -> list[Path]:
    """New files a candidate tries to create outside its sandbox (never existing ones: an escape must
    not clobber anything)."""
    return [ROOT / f"{out.stem}-pwned", Path.home() / f"{out.stem}-pwned", Path("/usr/lib") / f"{out.stem}-pwned"]


def candidate_source(kind: str, mark: str, out: Path) -> str:
    if kind in _EXTRA:
        return _EXTRA[kind]
    if kind in GPU_KINDS and (GPU_SOLUTIONS / f"{kind}.py").exists():
        return (GPU_SOLUTIONS / f"{kind}.py").read_text()
    text = (HOSTILE / f"{kind}.py").read_text()
    targets = [str(p) for p in write_targets(out)] if kind == "writes_outside_scratch" else \
        ["/root/.ssh/id_rsa", str(ROOT / "pyproject.toml"), "/etc/shadow"]
    return text.replace("__TARGETS__", repr(targets)).replace("__PORT__", "9").replace("__MARK__", repr(mark))


def plan(n: int, seed: int, device: str) -> list[str]:
    """n kinds in a seeded order: each kind at least once (when n allows), the rest drawn by weight."""
    rng = random.Random(seed)
    table = kinds_for(device)
    every = list(table)
    if n <= len(every):
        return rng.sample(every, n)
    weighted = [k for k, v in table.items() for _ in range(v[2])]
    kinds = every + rng.choices(weighted, k=n - len(every))
    rng.shuffle(kinds)
    return kinds


def soak_config(args: argparse.Namespace):  # noqa: ANN201
    from kevolve.sandbox.config import Backend, SandboxConfig

    cache = Path(tempfile.gettempdir()) / "kevolve-soak-cache"
    gpu = args.device.startswith("cuda")
    return SandboxConfig(device=args.device, timeout_s=120 if not gpu else 60, trials=5, max_timing_s=0.5 if not gpu else 0.2,
                         warmup=1, seed=1234, allow_torch_only=True, profile=False, compile_baseline="off",
                         memory_limit_gb=4.0 if not gpu else 12.0, scratch_limit_gb=1.0, cache_dir=cache,
                         backend=Backend(args.backend), isolation=args.isolation, image=args.image,
                         bwrap=os.environ.get("KEVOLVE_BWRAP") or None,
                         policy_allow=("all",))  # the soak tests containment, not the policy


def orchestrate(args: argparse.Namespace, start: int, out: Path) -> None:
    """Child process: evaluate candidates start.. and append one JSON line per verdict."""
    from kevolve.contract import load_problem
    from kevolve.records import Candidate
    from kevolve.sandbox.config import Backend
    from kevolve.sandbox.parent.make import make_sandbox

    config = soak_config(args)
    if config.backend is Backend.DOCKER:
        from kevolve.sandbox.isolate.container import docker_client
        from kevolve.sandbox.isolate.docker_image import ensure_local

        ensure_local(args.image, docker_client())
    sandbox = make_sandbox(config, spares=args.spares)  # spare runners (or containers) warm ahead of need
    prob = load_problem(PROBLEM)
    kinds = plan(args.n, args.seed, args.device)
    table = kinds_for(args.device)
    mark = os.environ.get(MARK_VAR, "soak")
    with out.open("a") as f:
        for i in range(start, args.n):
            if args._stop_at and time.time() > args._stop_at:
                break  # --max-minutes: stop between candidates, and close the sandbox as usual
            kind = kinds[i]
            cfg = config.model_copy(update=table[kind][3])
            t0 = time.monotonic()
            ev = None
            try:
                ev = sandbox.evaluate(prob, Candidate.from_source(candidate_source(kind, mark, out), prob.id), cfg)
                row = {"i": i, "kind": kind, "outcome": str(ev.outcome), "code": ev.reason_code,
                       "reason": ev.reason[:200]}
            except Exception as e:  # noqa: BLE001 - evaluate() must never raise for a candidate
                row = {"i": i, "kind": kind, "raised": f"{type(e).__name__}: {e}"[:300]}
            # time spent waiting for a warm runner: what a restart costs once hidden behind the last evaluation
            row.update(wall_s=round(time.monotonic() - t0, 3),
                       restart_s=ev.phase_s.get("start") if ev is not None else None)
            f.write(json.dumps(row) + "\n")
            f.flush()
    sandbox.close()


def leftovers(mark: str) -> list[str]:
    """Processes (not this one) whose environment carries the soak's marker: `pid cmdline`."""
    found = []
    needle = f"{MARK_VAR}={mark}".encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
            if needle in env.split(b"\0"):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{pid} {cmd[:160]}")
        except OSError:
            continue
    return found


# Also as expected: where the pids limit is not in force (root on a machine without a delegated pids
# cgroup, as on the H100 VM), the fork bomb is contained by the process-group kill at the time limit.
# A spinning daemon's CPU time is counted beside the calls where the runner has a cgroup (CPU device).
ALSO: dict[str, set[str]] = {"fork_bomb": {"timeout/timeout"}, "starts_daemon": {"rejected/background_cpu"}}


def verdict_table(rows: list[dict], device: str) -> list[dict]:
    """Per kind: expected (outcome, code), how many came back as expected, and what else came back."""
    table = kinds_for(device)
    out = []
    for kind in sorted({r["kind"] for r in rows}):
        mine = [r for r in rows if r["kind"] == kind]
        want = table[kind][:2]
        got: dict[str, int] = {}
        for r in mine:
            key = "raised" if "raised" in r else f"{r['outcome']}/{r['code']}"
            got[key] = got.get(key, 0) + 1
        ok = sum(got.pop(k, 0) for k in {f"{want[0]}/{want[1]}", *ALSO.get(kind, set())})
        out.append({"kind": kind, "expected": f"{want[0]}/{want[1]}", "n": len(mine), "as_expected": ok, "other": got,
                    "wall_median_s": round(statistics.median(r["wall_s"] for r in mine), 2)})
    return out


def summarize(rows: list[dict], deaths: int, wall: float, args: argparse.Namespace) -> dict:
    raised = [r for r in rows if "raised" in r]
    table = kinds_for(args.device)
    wrong = [r for r in rows if "raised" not in r and (r["outcome"], r["code"]) != table[r["kind"]][:2]
             and f"{r['outcome']}/{r['code']}" not in ALSO.get(r["kind"], set())]
    restarts = sorted(r["restart_s"] for r in rows if r.get("restart_s") is not None)
    return {
        "device": args.device, "backend": args.backend,
        "isolation": args.isolation if args.backend == "local" else "docker",
        "n_planned": args.n, "n_done": len(rows), "wall_s": round(wall, 1),
        "orchestrator_deaths": deaths + len(raised), "misclassified": len(wrong),
        "misclassified_examples": [{k: r[k] for k in ("i", "kind", "outcome", "code", "reason")} for r in wrong[:8]],
        "eval_wall_median_s": round(statistics.median(r["wall_s"] for r in rows), 2) if rows else None,
        "restart_median_s": round(statistics.median(restarts), 2) if restarts else None,
        "restart_p95_s": round(restarts[int(0.95 * (len(restarts) - 1))], 2) if restarts else None,
        "verdicts_by_kind": verdict_table(rows, args.device), "cpus": os.cpu_count(),
    }


def markdown(summary: dict) -> str:
    lines = [f"Soak: {summary['n_done']}/{summary['n_planned']} candidates on {summary['device']} "
             f"({summary['backend']}, isolation {summary['isolation']}) in {summary['wall_s']} s; "
             f"orchestrator deaths {summary['orchestrator_deaths']}, misclassified {summary['misclassified']}, "
             f"leftover processes {len(summary['leftover_processes'])}, files written outside "
             f"{len(summary['files_written_outside'])}; worker restart median {summary['restart_median_s']} s "
             f"(p95 {summary['restart_p95_s']} s)", "",
             "| kind | expected | n | as expected | other verdicts | median wall (s) |", "|---|---|---|---|---|---|"]
    for r in summary["verdicts_by_kind"]:
        other = ", ".join(f"{k} x{v}" for k, v in r["other"].items()) or "—"
        lines.append(f"| {r['kind']} | {r['expected']} | {r['n']} | {r['as_expected']} | {other} | {r['wall_median_s']} |")
    return "\n".join(lines)


def _remove_stray_containers() -> None:
    """Containers of an orchestrator that was killed mid-job (their pool never closed)."""
    from kevolve.sandbox.isolate.container import _LABEL, docker_client

    for c in docker_client().containers.list(all=True, filters={"label": _LABEL}):
        c.remove(force=True)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="candidates to evaluate")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (adds the GPU kinds)")
    ap.add_argument("--backend", choices=("local", "docker"), default="local")
    ap.add_argument("--isolation", choices=("auto", "bwrap", "none"), default="bwrap")
    ap.add_argument("--spares", type=int, default=None,
                    help="runners started ahead (default 1 on the CPU, 6 on a GPU, whose runners take seconds to start)")
    ap.add_argument("--image", default="kevolve-eval:soak")
    ap.add_argument("--seed", type=int, default=0, help="seed of the candidate mix")
    ap.add_argument("--out", type=Path, default=None, help="JSONL of every verdict (default: a temp file)")
    ap.add_argument("--max-minutes", type=float, default=None, help="stop starting new candidates after this")
    ap.add_argument("--markdown", action="store_true", help="also print the summary as a markdown table")
    ap.add_argument("--resume", action="store_true",
                    help="continue the run whose verdicts --out holds (machines that cap each command's time "
                         "run a long soak in slices); the summary covers every verdict in --out")
    ap.add_argument("--_orchestrate", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_stop_at", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not (args.device == "cpu" or args.device == "cuda" or (args.device.startswith("cuda:") and args.device[5:].isdigit())):
        ap.error(f"--device must be cpu, cuda or cuda:N, not {args.device!r}")
    if args.n < 1:
        ap.error("--n must be at least 1")
    if args.spares is None:
        args.spares = 6 if args.device.startswith("cuda") else 1
    return args


def main() -> None:
    args = parse_args()
    out = (args.out or Path(tempfile.mkstemp(prefix="kevolve-soak-", suffix=".jsonl")[1])).resolve()
    if args._orchestrate is not None:
        orchestrate(args, args._orchestrate, out)
        return
    if not (args.resume and out.exists()):
        out.write_text("")
    mark = uuid.uuid4().hex[:12]
    env = {**os.environ, MARK_VAR: mark, "OPENAI_API_KEY": SECRET}
    deaths, t0 = 0, time.monotonic()
    stop_at = time.time() + args.max_minutes * 60 if args.max_minutes else None
    while True:
        done = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        if len(done) >= args.n or (stop_at and time.time() > stop_at):
            break
        cmd = [sys.executable, "-P", __file__, "--n", str(args.n), "--device", args.device, "--backend", args.backend,
               "--isolation", args.isolation, "--image", args.image, "--seed", str(args.seed), "--out", str(out),
               "--spares", str(args.spares), "--_orchestrate", str(len(done))] + \
            (["--_stop_at", str(stop_at)] if stop_at else [])
        # the child stops itself at stop_at; killed only if a candidate outlasts that by far
        hard = None if stop_at is None else max(1.0, stop_at - time.time()) + 300.0
        try:
            rc = subprocess.run(cmd, timeout=hard, env=env).returncode
        except subprocess.TimeoutExpired:
            deaths += 1
            print("orchestrator did not stop 300 s after --max-minutes; killed", file=sys.stderr)
            break
        if rc != 0:
            deaths += 1
            print(f"orchestrator died (exit {rc}) after {len(done)} candidates; restarting", file=sys.stderr)
            if deaths > 20:
                break
    if args.backend == "docker":
        _remove_stray_containers()
    time.sleep(2.0)  # what dies with its runner has had time to go
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    summary = summarize(rows, deaths, time.monotonic() - t0, args)
    summary["leftover_processes"] = leftovers(mark)
    summary["files_written_outside"] = [str(p) for p in write_targets(out) if p.exists()]
    summary["verdicts"] = str(out)
    print(json.dumps(summary, indent=2))
    if args.markdown:
        print(markdown(summary))


if __name__ == "__main__":
    main()
