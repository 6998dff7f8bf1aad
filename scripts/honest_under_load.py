"""Honest candidates judged two at a time on the same cores: how many does a busy machine reject? (issue 32)

    python scripts/honest_under_load.py [--isolation auto,none] [--rounds 2] [--concurrency 2] [--out FILE]

Every honest control the repository has (the C++ solutions, the reused output buffer, the candidates of unusual
shape: non-contiguous output, float64 inside, OpenMP, a NumPy-backed output, weights precomputed in __init__) is
evaluated `rounds` times under each isolation, `concurrency` evaluations at once, each in its own sandbox (its own
judge and runners, as `optimize --concurrency 2` runs them), on the CPU. Prints one row per verdict that was not
`ok` and a summary line; exit 1 if any honest candidate was rejected. The goal is 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
# (problem, solution, needs allow_torch_only)
CONTROLS = [("relu", "relu_cpp", False), ("gelu_bias", "gelu_bias_cpp", False), ("softmax", "softmax_cpp", False),
            ("linear_relu", "linear_relu_cpp", False), ("relu", "relu_reused_buffer", True),
            ("relu", "unusual_noncontiguous", False), ("softmax", "unusual_float64_inside", False),
            ("relu", "unusual_openmp", False), ("relu", "unusual_numpy_output", False),
            ("linear_relu", "unusual_init_precompute", False), ("gelu_bias", "unusual_kept_output_buffer", False),
            ("flatten_view", "flatten_view_reshape", True)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--isolation", default="auto,none")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    from kevolve.contract import load_problem
    from kevolve.records import Candidate
    from kevolve.sandbox.config import SandboxConfig
    from kevolve.sandbox.parent.local import LocalSandbox

    rows: list[dict[str, object]] = []
    lock = threading.Lock()
    for isolation in a.isolation.split(","):
        boxes = [LocalSandbox() for _ in range(a.concurrency)]
        free = list(boxes)

        def one(job: tuple[int, str, str, bool]) -> None:
            rnd, problem, solution, torch_only = job
            with lock:
                box = free.pop()
            try:
                prob = load_problem(FIXTURES / "problems" / f"{problem}.py")
                cand = Candidate.from_source((FIXTURES / "solutions" / f"{solution}.py").read_text(), prob.id)
                cfg = SandboxConfig(device="cpu", isolation=isolation, allow_torch_only=torch_only, seed=1000 + rnd)
                t0 = time.monotonic()
                ev = box.evaluate(prob, cand, cfg)
                row = {"isolation": isolation, "round": rnd, "solution": solution, "outcome": str(ev.outcome),
                       "reason": ev.reason[:200], "speedup": ev.speedup, "wall_s": round(time.monotonic() - t0, 1)}
            finally:
                with lock:
                    free.append(box)
            with lock:
                rows.append(row)
                print(json.dumps(row), flush=True)

        jobs = [(r, p, s, t) for r in range(a.rounds) for p, s, t in CONTROLS]
        try:
            with ThreadPoolExecutor(a.concurrency) as pool:
                list(pool.map(one, jobs))
        finally:
            for box in boxes:
                box.close()
    bad = [r for r in rows if r["outcome"] != "ok"]
    if a.out:
        a.out.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    for r in bad:
        print(f"REJECTED {r['isolation']} round {r['round']} {r['solution']}: {r['outcome']}: {r['reason']}")
    print(f"{len(rows)} evaluations of honest candidates, {a.concurrency} at once: {len(bad)} not ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
