"""Evaluator benchmark (GPU): time per evaluation by phase, and speedup stability.

    python scripts/bench_eval.py --out $OUT/bench_eval.json

1. Evaluates honest kernels (CuPy NVRTC and load_inline) once each: seconds per phase.
2. Evaluates one honest kernel 3 times, each with a fresh reference (new seeds): speedup spread.
3. Times the same kernel and its eager reference with triton.testing.do_bench in a separate
   process, for comparison with the evaluator's numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "problems"
SOL = ROOT / "tests" / "gpu" / "solutions"

DO_BENCH = r'''
import importlib.util, json, sys, torch, triton.testing as tt
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m); return m
p, s = load(sys.argv[1], "prob"), load(sys.argv[2], "sol")
torch.manual_seed(0); init = p.get_init_inputs(); x = [t.cuda() for t in p.get_inputs()]
ref, new = p.Model(*init).cuda(), s.ModelNew(*init).cuda()
with torch.no_grad():
    r = tt.do_bench(lambda: ref(*x), warmup=100, rep=1000, return_mode="median")
    c = tt.do_bench(lambda: new(*x), warmup=100, rep=1000, return_mode="median")
print(json.dumps({"ref_ms": r, "cand_ms": c, "speedup": r / c}))
'''


def evaluate(problem: str, solution: str, seed: int | None, cache: Path, trials: int = 30):  # noqa: ANN201
    from kevolve.contract import load_problem
    from kevolve.records import Candidate
    from kevolve.sandbox.config import SandboxConfig
    from kevolve.sandbox.parent.make import make_sandbox

    prob = load_problem(FIX / f"{problem}.py")
    cand = Candidate.from_source((SOL / f"{solution}.py").read_text(), prob.id)
    cfg = SandboxConfig(device="cuda", seed=seed, trials=trials, cache_dir=cache, compile_baseline="on")
    box = make_sandbox(cfg)
    try:
        return box.evaluate(prob, cand, cfg)
    finally:
        box.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("bench_eval.json"))
    ap.add_argument("--skip-inline", action="store_true")
    args = ap.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="kevolve-bench-"))
    rows, result = [], {}
    cases = [("relu_big", "relu_cupy"), ("fused_chain", "fused_chain_cupy")]
    if not args.skip_inline:
        cases.append(("relu_big", "relu_inline"))
    for problem, solution in cases:
        ev = evaluate(problem, solution, 11, cache)
        rows.append({"problem": problem, "solution": solution, "outcome": ev.outcome.value,
                     "reason": ev.reason, "speedup": ev.speedup, "speedup_vs_compile": ev.speedup_vs_compile,
                     "phases_s": ev.phase_s, "wall_s": ev.wall_s,
                     "cand_ms": ev.timing.median_ms if ev.timing else None,
                     "eager_ms": ev.ref_timing.median_ms if ev.ref_timing else None,
                     "compile_ms": ev.compile_ref_timing.median_ms if ev.compile_ref_timing else None})
    result["per_evaluation"] = rows
    repeats = []
    for _ in range(3):
        ev = evaluate("fused_chain", "fused_chain_cupy", None, cache)
        repeats.append({"speedup": ev.speedup, "cand_ms": ev.timing.median_ms if ev.timing else None,
                        "cand_iqr_ms": ev.timing.iqr_ms if ev.timing else None,
                        "eager_ms": ev.ref_timing.median_ms if ev.ref_timing else None,
                        "trials": ev.timing.trials if ev.timing else None, "outcome": ev.outcome.value})
    sp = [r["speedup"] for r in repeats if r["speedup"]]
    result["repeats"] = repeats
    result["speedup_spread"] = (max(sp) - min(sp)) / statistics.median(sp) if len(sp) == 3 else None
    db = subprocess.run([sys.executable, "-c", DO_BENCH, str(FIX / "fused_chain.py"),
                         str(SOL / "fused_chain_cupy.py")], capture_output=True, text=True)
    result["do_bench"] = json.loads(db.stdout.strip().splitlines()[-1]) if db.returncode == 0 else db.stderr[-2000:]
    args.out.write_text(json.dumps(result, indent=2))
    print(f"{'problem':12} {'solution':18} {'outcome':10} {'speedup':>8} {'wall s':>7}  phases")
    for r in rows:
        ph = " ".join(f"{k}={v:.2f}" for k, v in r["phases_s"].items())
        sp_ = f"{r['speedup']:.2f}" if r["speedup"] else "-"
        print(f"{r['problem']:12} {r['solution']:18} {r['outcome']:10} {sp_:>8} {r['wall_s']:7.1f}  {ph}")
    print("repeats (fused_chain):", [f"{s:.3f}" for s in sp], "spread", result["speedup_spread"])
    print("do_bench:", result["do_bench"])


if __name__ == "__main__":
    main()
