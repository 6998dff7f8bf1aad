"""Time `kevolve eval` cold and warm (issue 36): N evaluations in a fresh process each time, as a user runs them.

    python scripts/bench_warm_eval.py [--n 5] [--pause 5] [--device cpu] [--problem P --solution S] [--json]

Rows, end to end (the `kevolve eval` process's wall time, its start included), caches empty at the start:
- cold: `--no-warm`, each evaluation starts its own judge, as before the service; the first one measures the
  problem's torch.compile baseline (where it is on) and caches it, the next N reuse it;
- service start: the first evaluation through a new service (it starts the service, its judge and runners);
- warm: the next N evaluations through that service, `--pause` seconds apart (a user reading the verdict and
  editing the kernel: the service prepares the next evaluation's problem meanwhile), and once more back to back.
The service lives in a private temporary folder (KEVOLVE_WARM_DIR) and is stopped at the end; the user's own is
not touched. Each evaluation's verdict must be `ok`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_eval(args: argparse.Namespace, env: dict[str, str], *extra: str) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "kevolve.cli", "eval", args.problem, args.solution, "--device", args.device,
           "--allow-torch-only", "--json", *extra]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit(f"kevolve eval failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    out = json.loads(r.stdout)
    if out["status"] != "ok":
        sys.exit(f"expected ok, got {out['status']}: {out['reason']}")
    return wall, out


def row(name: str, walls: list[float], note: str = "") -> dict:
    return {"mode": name, "n": len(walls), "median_s": round(statistics.median(walls), 2),
            "min_s": round(min(walls), 2), "max_s": round(max(walls), 2), "note": note}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--pause", type=float, default=5.0, help="seconds between warm evaluations")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--problem", default=str(ROOT / "tests/fixtures/problems/relu.py"))
    ap.add_argument("--solution", default=str(ROOT / "tests/fixtures/solutions/relu_reused_buffer.py"))
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kevolve-warm-bench-") as d:
        os.chmod(d, 0o700)
        env = {**os.environ, "KEVOLVE_WARM_DIR": d, "KEVOLVE_CACHE_DIR": str(Path(d) / "cache")}  # empty caches
        env.pop("KEVOLVE_WARM", None)
        try:
            first_cold = run_eval(args, env, "--no-warm")[0]  # measures the torch.compile baseline, caches it
            cold = [run_eval(args, env, "--no-warm")[0] for _ in range(args.n)]
            start, first = run_eval(args, env)
            warm, served = [], []
            for _ in range(args.n):
                time.sleep(args.pause)
                wall, out = run_eval(args, env)
                warm.append(wall)
                served.append((out["warm"]["pid"], out["warm"]["served"], out["warm"]["prepared_ahead"]))
            b2b = [run_eval(args, env)[0] for _ in range(max(2, args.n // 2))]
        finally:
            subprocess.run([sys.executable, "-m", "kevolve.cli", "sandbox", "warm-stop"], env=env, capture_output=True)
    pids = {p for p, _s, _a in served} | {first["warm"]["pid"]}
    rows = [row("cold (--no-warm), first of the problem", [first_cold], "torch.compile baseline measured"),
            row("cold (--no-warm)", cold, "torch.compile baseline from the cache"),
            row("service start (first eval)", [start], "torch.compile baseline from the cache"),
            row(f"warm ({args.pause:g} s apart)", warm, f"one service (pids {sorted(pids)}), prepared ahead "
                f"{sum(a for *_x, a in served)}/{len(served)}"),
            row("warm, back to back", b2b, "waits for the previous evaluation's next problem to be prepared")]
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.node(),
            "cpus": os.cpu_count(), "device": args.device, "problem": Path(args.problem).name,
            "solution": Path(args.solution).name, "load_avg": os.getloadavg()}
    if args.json:
        print(json.dumps({**meta, "rows": rows}))
        return
    print(f"# {meta['date']}, {meta['cpus']} CPUs, load {meta['load_avg'][0]:.1f}, {meta['problem']} / "
          f"{meta['solution']}, --device {args.device}")
    print("| mode | n | median s | min s | max s | note |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['n']} | {r['median_s']} | {r['min_s']} | {r['max_s']} | {r['note']} |")


if __name__ == "__main__":
    main()
