"""Soak the sandbox: evaluate N mixed hostile and honest candidates in a row and count failures.

    python scripts/soak.py --n 1000 --backend docker        # or --backend local (bubblewrap)

Candidates come from tests/adversarial/hostile (Python-only; relu problem, allow_torch_only) plus a
few plain crashes. Reports, as JSON (and a markdown row with --markdown):
- orchestrator deaths: the evaluating process died or evaluate() raised (goal 0). The evaluations
  run in a child process that appends each verdict to a JSONL file; the parent restarts it after
  a death and carries on with the next candidate.
- misclassified verdicts: outcome or reason code differs from the candidate's expected one (goal 0).
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "adversarial" / "hostile"
PROBLEM = ROOT / "tests" / "fixtures" / "problems" / "relu.py"

_EXTRA = {
    "segfaults": "import ctypes\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                 "    def forward(self, x):\n        ctypes.string_at(0)\n",
    "exits": "import os\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
             "    def forward(self, x):\n        os._exit(3)\n",
    "wrong": "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2\n",
    "kills_parent": "import os, signal, torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                    "    def forward(self, x):\n        try:\n            os.kill(os.getppid(), signal.SIGKILL)\n"
                    "        except OSError:\n            pass\n        return torch.relu(x)\n",
}
# kind -> (expected outcome, expected reason code, weight in the mix, config overrides)
KINDS: dict[str, tuple[str, str, int, dict]] = {
    "honest": ("ok", "ok", 12, {}),
    "reads_secrets": ("ok", "ok", 2, {}),
    "writes_outside_scratch": ("ok", "ok", 2, {}),
    "opens_socket": ("ok", "ok", 2, {}),
    "kills_parent": ("ok", "ok", 2, {}),
    "wrong": ("incorrect", "incorrect", 2, {}),
    "segfaults": ("crashed", "signal", 2, {}),
    "exits": ("crashed", "exit", 2, {}),
    "fork_bomb": ("runtime_error", "runtime_error", 1, {}),  # default pids limit (512)
    "fills_disk": ("crashed", "disk_limit", 1, {"scratch_limit_gb": 0.25}),
    "allocates_all_memory": ("crashed", "memory_limit", 1, {"memory_limit_gb": 2.0}),
    "spins_forever": ("timeout", "timeout", 1, {"timeout_s": 20.0}),
}


def candidate_source(kind: str) -> str:
    if kind in _EXTRA:
        return _EXTRA[kind]
    text = (HOSTILE / f"{kind}.py").read_text()
    return text.replace("__TARGETS__", repr(["/root/.ssh/id_rsa", str(ROOT / "pyproject.toml"), "/etc/shadow"])) \
               .replace("__PORT__", "9")


def plan(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    kinds = [k for k, v in KINDS.items() for _ in range(v[2])]
    return [rng.choice(kinds) for _ in range(n)]


def orchestrate(args: argparse.Namespace, start: int, out: Path) -> None:
    """Child process: evaluate candidates start.. and append one JSON line per verdict."""
    from kevolve.kernelbench.problem import load_problem
    from kevolve.records import Candidate
    from kevolve.sandbox.config import Backend, SandboxConfig
    from kevolve.sandbox.make import make_sandbox

    cache = Path(tempfile.gettempdir()) / "kevolve-soak-cache"
    config = SandboxConfig(device="cpu", timeout_s=120, trials=5, max_timing_s=0.5, warmup=1, seed=1234,
                           allow_torch_only=True, profile=False, memory_limit_gb=4.0, scratch_limit_gb=1.0,
                           cache_dir=cache, backend=Backend(args.backend), isolation=args.isolation,
                           image=args.image, policy_allow=("all",))  # the soak tests containment, not the policy
    if config.backend is Backend.DOCKER:
        from kevolve.sandbox.docker_backend import docker_client
        from kevolve.sandbox.docker_image import ensure_local

        ensure_local(args.image, docker_client())
    sandbox = make_sandbox(config)  # the judge keeps a spare runner (or container) warm ahead of need
    prob = load_problem(PROBLEM)
    kinds = plan(args.n, args.seed)
    with out.open("a") as f:
        for i in range(start, args.n):
            kind = kinds[i]
            cfg = config.model_copy(update=KINDS[kind][3])
            t0 = time.monotonic()
            ev = None
            try:
                ev = sandbox.evaluate(prob, Candidate.from_source(candidate_source(kind), prob.id), cfg)
                row = {"i": i, "kind": kind, "outcome": str(ev.outcome), "code": ev.reason_code,
                       "reason": ev.reason[:200]}
            except Exception as e:  # noqa: BLE001 - evaluate() must never raise for a candidate
                row = {"i": i, "kind": kind, "raised": f"{type(e).__name__}: {e}"[:300]}
            # time spent waiting for a warm runner: what a restart costs once hidden behind the last evaluation
            row.update(wall_s=round(time.monotonic() - t0, 3),
                       restart_s=ev.phase_s.get("start") if ev is not None else None)
            f.write(json.dumps(row) + "\n")
            f.flush()
    if config.backend is Backend.DOCKER:
        inner.close()


def summarize(rows: list[dict], deaths: int, wall: float, args: argparse.Namespace) -> dict:
    raised = [r for r in rows if "raised" in r]
    wrong = [r for r in rows if "raised" not in r and (r["outcome"], r["code"]) != KINDS[r["kind"]][:2]]
    restarts = sorted(r["restart_s"] for r in rows if r.get("restart_s") is not None)
    by_kind: dict[str, int] = {}
    for r in rows:
        by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + 1
    return {
        "backend": args.backend, "isolation": args.isolation if args.backend == "local" else "docker",
        "n_planned": args.n, "n_done": len(rows), "wall_s": round(wall, 1),
        "orchestrator_deaths": deaths + len(raised), "misclassified": len(wrong),
        "misclassified_examples": [{k: r[k] for k in ("i", "kind", "outcome", "code", "reason")} for r in wrong[:5]],
        "eval_wall_median_s": round(statistics.median(r["wall_s"] for r in rows), 2) if rows else None,
        "restart_median_s": round(statistics.median(restarts), 2) if restarts else None,
        "restart_p95_s": round(restarts[int(0.95 * (len(restarts) - 1))], 2) if restarts else None,
        "by_kind": by_kind, "cpus": os.cpu_count(),
    }


def _remove_stray_containers() -> None:
    """Containers of an orchestrator that was killed mid-job (their pool never closed)."""
    from kevolve.sandbox.docker_backend import _LABEL, docker_client

    for c in docker_client().containers.list(all=True, filters={"label": _LABEL}):
        c.remove(force=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="candidates to evaluate")
    ap.add_argument("--backend", choices=("local", "docker"), default="local")
    ap.add_argument("--isolation", choices=("auto", "bwrap", "none"), default="bwrap")
    ap.add_argument("--image", default="kevolve-eval:soak")
    ap.add_argument("--seed", type=int, default=0, help="seed of the candidate mix")
    ap.add_argument("--out", type=Path, default=None, help="JSONL of every verdict (default: a temp file)")
    ap.add_argument("--max-minutes", type=float, default=None, help="stop starting new candidates after this")
    ap.add_argument("--_orchestrate", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkstemp(prefix="kevolve-soak-", suffix=".jsonl")[1])
    if args._orchestrate is not None:
        orchestrate(args, args._orchestrate, out)
        return
    out.write_text("")
    deaths, t0 = 0, time.monotonic()
    while True:
        done = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        if len(done) >= args.n:
            break
        if args.max_minutes and time.monotonic() - t0 > args.max_minutes * 60:
            break
        cmd = [sys.executable, __file__, "--n", str(args.n), "--backend", args.backend, "--isolation",
               args.isolation, "--image", args.image, "--seed", str(args.seed), "--out", str(out),
               "--_orchestrate", str(len(done))]
        deadline = None if args.max_minutes is None else max(1.0, args.max_minutes * 60 - (time.monotonic() - t0))
        try:
            rc = subprocess.run(cmd, timeout=deadline).returncode
        except subprocess.TimeoutExpired:
            break  # --max-minutes reached mid-run; the child was killed with it
        if rc != 0:
            deaths += 1
            print(f"orchestrator died (exit {rc}) after {len(done)} candidates; restarting", file=sys.stderr)
            if deaths > 20:
                break
    if args.backend == "docker":
        _remove_stray_containers()
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    summary = summarize(rows, deaths, time.monotonic() - t0, args)
    summary["verdicts"] = str(out)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
