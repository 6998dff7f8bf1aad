"""Why does a timing spread? The eager reference and a candidate timed several ways, per input slot.

    python3 -P scripts/diagnose_timing.py --problem tests/fixtures/problems/relu_big.py \
        --candidate tests/gpu/solutions/relu_cupy.py --out $OUT/diagnose.json

Runs a judge in this process (no parent, no subprocess judge) on the GPU and prints, for the eager
reference and the candidate: median, IQR and minimum per input slot, and over all calls, for
  A. eager alone (the problem's session baseline: its runner, judge flush before every call),
  B. a normal evaluation (candidate and eager interleaved),
  C. eager alone with a fixed 1 ms GPU pad (is the pad too short for the host side?),
so a bimodal eager (seen on the H100, 2026-11-23: 0.048 vs 0.065 ms) can be pinned on the slot,
the interleaving, or the pad; run it with --spares 0 and --spares 1 to see whether a spare runner
warming up (CUDA context, profiler) during the timing is the disturbance. Prints a table last; writes every call's numbers to --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def summary(calls: list[tuple[str, float]]) -> dict:
    by: dict[str, list[float]] = {}
    for k, ms in calls:
        by.setdefault(k, []).append(ms)
    allv = [ms for _k, ms in calls]

    def s(v: list[float]) -> dict:
        q = statistics.quantiles(v, n=4) if len(v) >= 2 else [v[0]] * 3
        return {"n": len(v), "median": statistics.median(v), "iqr": q[2] - q[0], "min": min(v)}

    return {"all": s(allv), **{k: s(v) for k, v in sorted(by.items())}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", type=Path, required=True)
    ap.add_argument("--candidate", type=Path, required=True)
    ap.add_argument("--calls", type=int, default=120)
    ap.add_argument("--spares", type=int, default=1, help="runners the judge warms ahead (0: none warms while timing)")
    ap.add_argument("--out", type=Path, default=Path("runs/diagnose.json"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--evals", type=int, default=3, help="evaluations of the candidate in this one judge")
    a = ap.parse_args()
    import os

    a.problem, a.candidate, a.out = a.problem.resolve(), a.candidate.resolve(), a.out.resolve()
    os.chdir(tempfile.mkdtemp(prefix="kevolve-diagnose-"))
    from kevolve.contract import load_problem
    from kevolve.records import Candidate
    from kevolve.sandbox.config import SandboxConfig
    from kevolve.sandbox.judge import serve as judge_mod
    from kevolve.sandbox.judge.serve import Judge

    series: list[dict] = []  # every eager and candidate call of the evaluations, in order
    t_start = time.monotonic()
    ref_call, runner_request = judge_mod.ReferenceRunner.call, judge_mod.RunnerProcess.request

    roles: dict[int, str] = {}

    def logged_ref(self, key, deadline, op="call", pad_ms=0.05):
        roles[id(self.runner)] = self.role
        return ref_call(self, key, deadline, op, pad_ms)

    def logged_request(self, msg, deadline):
        out = runner_request(self, msg, deadline)
        if isinstance(msg, dict) and msg.get("op") == "call" and isinstance(out, dict) and "ms" in out:
            series.append({"t": round(time.monotonic() - t_start, 4), "who": roles.get(id(self), f"cand{id(self)}"),
                           "slot": msg.get("slot"), "covered": out.get("covered"),
                           "ms": out["ms"], "wall_ms": out.get("wall_ms"), "host_ms": out.get("host_ms"), "pad": msg.get("pad_ms")})
        return out

    judge_mod.ReferenceRunner.call = logged_ref  # type: ignore[method-assign]
    judge_mod.RunnerProcess.request = logged_request  # type: ignore[method-assign]

    prob = load_problem(a.problem)
    cand = Candidate.from_source(a.candidate.read_text(), prob.id)
    cfg = SandboxConfig(device=a.device, seed=3, trials=a.calls, max_timing_s=30.0, compile_baseline="off",
                        policy_allow=("all",), cache_dir=Path(tempfile.mkdtemp()))
    judge = Judge(a.device, spares=a.spares)
    state, eager, _summary = judge._problem(prob, cfg)
    out: dict = {}

    from kevolve.sandbox.judge.flush import Pad

    def alone(pad: float | None) -> list[tuple[str, float]]:
        """Eager alone: the judge's Pad sizing (None) or a fixed pad; uncovered calls included."""
        calls, deadline, sized = [], time.monotonic() + 300, Pad()
        for i in range(a.calls):
            key = state.pool[i % len(state.pool)]
            judge.flush()
            r = eager.call(key, deadline, pad_ms=pad if pad is not None else sized())
            sized.saw(r.host_ms, r.covered)
            calls.append((key, r.ms))
        return calls

    def evaluation() -> dict:
        ev = judge.evaluate(prob, cand, cfg)
        return {"outcome": ev.outcome.value, "speedup": ev.speedup,
                "candidate": ev.timing.model_dump() if ev.timing else None,
                "eager_interleaved": ev.ref_timing.model_dump() if ev.ref_timing else None}

    out["B_evaluations"] = [evaluation()]  # first: does the first evaluation differ?
    out["A_eager_alone"] = summary(alone(None))
    out["B_evaluations"] += [evaluation() for _ in range(a.evals - 1)]
    out["C_eager_alone_pad_1ms"] = summary(alone(1.0))
    out["series"] = series
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1))
    print("| run | slot | n | median ms | IQR ms | min ms |\n|---|---|---|---|---|---|")
    for run in ("A_eager_alone", "C_eager_alone_pad_1ms"):
        for slot, v in out[run].items():
            print(f"| {run} | {slot} | {v['n']} | {v['median']:.4f} | {v['iqr']:.4f} | {v['min']:.4f} |")
    for n, b in enumerate(out["B_evaluations"]):
        for who in ("candidate", "eager_interleaved"):
            t = b[who]
            if t:
                print(f"| B{n} {who} | all | {t['trials']} | {t['median_ms']:.4f} | {t['iqr_ms']:.4f} | {t['min_ms']:.4f} |")
        print(f"speedup (B{n}): {b['speedup']}")
    by: dict[str, list[float]] = {}
    for c in series:
        if c.get("wall_ms") is not None:
            by.setdefault(c["who"] if c["who"] == "eager" else "candidate", []).append(c["wall_ms"] - c["ms"])
    for who, v in sorted(by.items()):
        q = statistics.quantiles(v, n=10) if len(v) >= 2 else v * 9
        print(f"wall - event, {who}: n {len(v)} q10 {q[0]:.4f} median {statistics.median(v):.4f} q90 {q[-1]:.4f} ms")
    judge.forget()


if __name__ == "__main__":
    main()
