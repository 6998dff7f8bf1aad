#!/usr/bin/env python3
"""Run the offline proposer (no LLM) over a sample of KernelBench level-1 and level-2 problems on CUDA.

    python scripts/run_offline_gpu.py --suite ~/KernelBench --sample 30 --out runs/offline_h100

For each sampled problem: trace and fuse, evaluate the default candidate with the sandbox, then
tune the kernels' parameters with the evolutionary search, keeping the fastest verified candidate.
Each finished problem writes OUT/L{level}_{number}.json (and .best.py), so a rerun with the same
--out skips finished problems (resumable); --time-limit bounds the whole run and --problem-time /
--budget each problem. At the end (or with --report-only) it prints, per level, the share solved
and the geometric-mean speedups over eager and over torch.compile of the solved problems, measured
in the same evaluations, and writes OUT/summary.md.

On machines that start empty and cap each command's time, run it in slices: `--time-limit 520
--bundle B.tgz` reads earlier results from B.tgz and writes all results back to it; carry the
returned B.tgz into the next call. Solved = the sandbox's verdict is ok (verified, any speed); the
'faster than eager' column counts the solved ones with a speedup above 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import tarfile
import time
from pathlib import Path

log = logging.getLogger("run_offline_gpu")


def sample_numbers(numbers: list[int], n: int) -> list[int]:
    """`n` problem numbers spread evenly over the level (deterministic)."""
    if n >= len(numbers):
        return numbers
    return [numbers[(i * len(numbers)) // n] for i in range(n)]


def run_problem(sp, args, sandbox, config) -> dict:
    from kevolve.offline.generate import plans
    from kevolve.offline.search import search
    from kevolve.offline.space import describe_all
    from kevolve.offline.graph.trace import TraceError
    from kevolve.contract import ProblemError

    from kevolve.records import Candidate, Origin

    t0 = time.monotonic()
    row: dict = {"key": sp.key, "level": sp.level, "number": sp.number, "file": sp.file}
    if sp.problem is None:
        return row | {"status": "unavailable", "reason": sp.unavailable, "wall_s": 0.0}
    try:
        ps = plans(sp.problem)
    except TraceError as e:
        return row | {"status": "no_candidate", "reason": str(e), "wall_s": time.monotonic() - t0}

    def evaluate(got):
        cand = Candidate.from_source(got.source, sp.problem.id, origin=Origin.OFFLINE, proposer="offline",
                                     offline=got.choice)
        return sandbox.evaluate(sp.problem, cand, config)

    try:
        res = search(ps, evaluate, budget=args.budget, time_limit_s=args.problem_time, seed=args.seed,
                     gpu_seconds=args.gpu_seconds)
    except ProblemError as e:  # the reference itself could not run here (memory, …): not the proposer's fault
        return row | {"status": "unavailable", "reason": f"reference_failed: {e}", "wall_s": time.monotonic() - t0}
    best = res.best
    trials = [{"outcome": t.evaluation.outcome.value, "reason": t.evaluation.reason[:300],
               "speedup": t.evaluation.speedup, "speedup_vs_compile": t.evaluation.speedup_vs_compile,
               "speedup_launch": t.evaluation.speedup_launch, "fitness": t.evaluation.fitness,
               "technique": t.technique, "roofline": t.roofline, "wall_s": t.evaluation.wall_s,
               "params": [vars(x) for x in t.params]} for t in res.trials]
    row |= {"groups": {v.technique: [f.group.describe() for f in v.fused] for v in ps}, "trials": trials,
            "stopped": res.stopped, "gpu_s": res.gpu_seconds, "wall_s": time.monotonic() - t0}
    if best is None:
        first = res.trials[0].evaluation if res.trials else None
        return row | {"status": "failed", "reason": first.reason if first else "no trial ran"}
    ev = best.evaluation
    ms = lambda t: None if t is None else t.median_ms
    (Path(args.out) / f"L{sp.level}_{sp.number}.best.py").write_text(best.source)
    win = next(v for v in ps if v.technique == best.technique)
    # what ranking by device time alone (the fitness before 2026-11-25) would have kept, from the same trials
    by_device = max((t for t in res.trials if t.evaluation.ok), key=lambda t: t.evaluation.speedup or 0.0)
    from kevolve.where_time import rows as where_rows

    from kevolve.where_time import parts

    row |= {"speedup_launch": ev.speedup_launch, "fitness": ev.fitness, "where": where_rows(ev), "parts": parts(ev, 5),
            "device_pick": {"speedup": by_device.evaluation.speedup, "speedup_launch": by_device.evaluation.speedup_launch,
                            "same": by_device is best}}
    return row | {"status": "solved", "reason": ev.reason, "speedup": ev.speedup, "technique": best.technique,
                  "roofline": best.roofline, "settings": describe_all(best.params, [f.group for f in win.fused]),
                  "speedup_vs_compile": ev.speedup_vs_compile, "runtime_ms": ms(ev.timing),
                  "eager_ms": ms(ev.ref_timing), "compile_ms": ms(ev.compile_ref_timing), "device": ev.device}


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(out: Path, levels: list[int]) -> str:
    """Per-level table from the result files under `out`."""
    rows = [json.loads(f.read_text()) for f in sorted(out.glob("L*_*.json"))]
    lines = [("| level | sampled | solved | share | faster than eager | geomean vs eager | geomean vs torch.compile "
             "| geomean vs eager, launch work counted | device |"), "|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v: "n/a" if v is None else f"{v:.2f}x"
    for lv in levels:
        rs = [r for r in rows if r["level"] == lv and r["status"] != "unavailable"]
        ok = [r for r in rs if r["status"] == "solved"]
        dev = sorted({r.get("device", "") for r in ok} - {""})
        share = f"{100 * len(ok) / len(rs):.0f}%" if rs else "n/a"
        fast = sum(1 for r in ok if r["speedup"] > 1.0)
        lines.append(f"| {lv} | {len(rs)} | {len(ok)} | {share} | {fast} | {fmt(geomean([r['speedup'] for r in ok]))} | "
                     f"{fmt(geomean([r['speedup_vs_compile'] for r in ok if r.get('speedup_vs_compile')]))} | "
                     f"{fmt(geomean([r['speedup_launch'] for r in ok if r.get('speedup_launch')]))} | "
                     f"{', '.join(dev) or '-'} |")
    fails: dict[str, int] = {}
    for r in rows:
        if r["status"] not in ("solved",):
            code = r["status"] + ": " + r.get("reason", "").split(":", 1)[0]
            fails[code] = fails.get(code, 0) + 1
    lines += ["", "Not solved, by reason: " + (", ".join(f"{k} ({v})" for k, v in sorted(fails.items())) or "none")]
    return "\n".join(lines + ["", *per_problem(rows), *where_section(rows)]) + "\n"


def per_problem(rows: list[dict]) -> list[str]:
    """One line per problem: the winner's technique (where its lineage started), speedups, roofline fraction."""
    fmt = lambda v, f="{:.2f}x": "-" if v is None else f.format(v)  # noqa: E731
    out = ["| problem | status | technique | settings | vs eager | vs torch.compile | vs eager, launch work counted "
           "| by device time alone: vs eager / launch | roofline | trials | stopped |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["level"], r.get("number", 0))):
        name = f"L{r['level']}_{r.get('number', '?')} {Path(r.get('file', '')).stem[:40]}".strip()
        dp = r.get("device_pick") or {}
        pick = "-" if not dp else "same" if dp.get("same") else f"{fmt(dp.get('speedup'))} / {fmt(dp.get('speedup_launch'))}"
        out.append(f"| {name} | {r['status']} | {r.get('technique', '-')} | {r.get('settings', '-')} | {fmt(r.get('speedup'))} | "
                   f"{fmt(r.get('speedup_vs_compile'))} | {fmt(r.get('speedup_launch'))} | {pick} | "
                   f"{fmt(r.get('roofline'), '{:.0%}')} | "
                   f"{len(r.get('trials', []))} | {r.get('stopped', '-')} |")
    return out


def where_section(rows: list[dict]) -> list[str]:
    """Per solved problem, where its winner's time goes beside eager's (kevolve/where_time.py: kernels by who wrote
    them, one profiled call each): the whole-model breakdown of issue 34."""
    got = [r for r in sorted(rows, key=lambda r: (r["level"], r.get("number", 0))) if r.get("where")]
    if not got:
        return []
    out = ["", "Where the time goes (one profiled call each side: eager / candidate, share of its side):", "",
           "| problem | library kernels | PyTorch's other | the candidate's own (eager's it replaced / own) | total |",
           "|---|---|---|---|---|"]
    for r in got:
        parts = {row[0].strip(): row for row in r["where"]}
        own = next((v for k, v in parts.items() if k.startswith("the candidate's own")), None)
        cell = lambda row: "-" if row is None else f"{row[1]} / {row[2]} ({row[3]})"  # noqa: E731
        other = next((v for k, v in parts.items() if k.startswith("PyTorch's")), None)
        out.append(f"| L{r['level']}_{r.get('number', '?')} | {cell(parts.get('library kernels (cuBLAS, cuDNN, CUTLASS)'))} | "
                   f"{cell(other)} | {'-' if own is None else own[0].strip() + ': ' + own[2] + ' (' + own[3] + ')'} | "
                   f"{cell(parts.get('total (one profiled call)'))} |")
    split = [r for r in got if r.get("parts")]
    if split:
        out += ["", "By part (the model split where both sides run the same kernel; the five largest by eager's time):",
                "", "| problem | part: the candidate's kernels | eager's kernels | share of eager | eager / candidate ms "
                "| speedup |", "|---|---|---|---|---|---|"]
        for r in split:
            out += [f"| L{r['level']}_{r.get('number', '?')} | {' | '.join(p)} |" for p in r["parts"]]
    return out


def pack(out: Path, bundle: Path) -> None:
    """Results (JSON, best sources, summary) into one tar.gz, without the build cache."""
    bundle.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(bundle, "w:gz") as tar:
        for f in sorted(out.glob("L*_*")) + sorted(out.glob("summary.md")):
            tar.add(f, arcname=f.name)


def unpack(bundle: Path, out: Path) -> None:
    """Earlier results back into `out` (plain files only)."""
    with tarfile.open(bundle) as tar:
        tar.extractall(out, members=[m for m in tar.getmembers() if m.isfile() and "/" not in m.name],
                       filter="data")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", required=True, help="KernelBench checkout (or a folder with level1/, level2/)")
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--sample", type=int, default=30, help="problems per level, spread evenly over its numbers")
    ap.add_argument("--problems", default=None, help="explicit numbers instead of a sample, e.g. '1-10,19'")
    ap.add_argument("--out", default="runs/offline_bench", help="result folder (reused: finished problems are skipped)")
    ap.add_argument("--budget", type=int, default=5, help="candidates evaluated per problem")
    ap.add_argument("--problem-time", type=float, default=300.0, help="seconds of search per problem")
    ap.add_argument("--gpu-seconds", type=float, default=None,
                    help="evaluation seconds (GPU time held) per problem's search; none by default")
    ap.add_argument("--time-limit", type=float, default=3 * 3600.0, help="seconds for the whole run")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per sandbox job")
    ap.add_argument("--memory-gb", type=float, default=100.0, help="host memory limit per sandbox worker")
    ap.add_argument("--scratch-gb", type=float, default=48.0, help="scratch space per sandbox worker (outputs)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--cache-dir", default=None, help="sandbox cache (references, builds); default OUT/cache")
    ap.add_argument("--max-timing-s", type=float, default=3.0, help="seconds of timed trials per callable")
    ap.add_argument("--draws", type=int, default=3, help="fresh input draws in the correctness check")
    ap.add_argument("--bundle", default=None, help="tar.gz of the results: read at the start (if present) and "
                    "rewritten at the end, to carry a run across machines that start empty")
    ap.add_argument("--report-only", action="store_true", help="print the summary of OUT and exit")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    levels = [int(x) for x in args.levels.split(",")]
    if args.bundle and Path(args.bundle).is_file():
        unpack(Path(args.bundle), out)
    if args.report_only:
        sys.stdout.write(summarize(out, levels))
        return 0

    from kevolve.kernelbench.suite import load_suite
    from kevolve.sandbox.config import SandboxConfig
    from kevolve.sandbox.parent.make import make_sandbox

    suite = load_suite(args.suite, levels, args.problems)
    chosen = []
    for lv in levels:
        at = [sp for sp in suite if sp.level == lv]
        keep = set(sample_numbers([sp.number for sp in at], args.sample)) if args.problems is None else None
        chosen += [sp for sp in at if keep is None or sp.number in keep]
    config = SandboxConfig(device=args.device, seed=args.seed, timeout_s=args.timeout, memory_limit_gb=args.memory_gb,
                           scratch_limit_gb=args.scratch_gb, max_timing_s=args.max_timing_s, n_draws=args.draws,
                           cache_dir=Path(args.cache_dir or out / "cache"))
    sandbox = make_sandbox(config)
    t0 = time.monotonic()
    for i, sp in enumerate(chosen):
        dest = out / f"L{sp.level}_{sp.number}.json"
        if dest.exists():
            continue
        if time.monotonic() - t0 > args.time_limit:
            log.warning("time limit reached after %d of %d problems; rerun with the same --out to continue",
                        i, len(chosen))
            break
        log.info("[%d/%d] %s", i + 1, len(chosen), sp.key)
        row = run_problem(sp, args, sandbox, config)
        dest.write_text(json.dumps(row, indent=1))
        if args.bundle:  # after every problem: a command killed at its time limit keeps what it finished
            pack(out, Path(args.bundle))
        log.info("%s: %s %s", sp.key, row["status"],
                 f"{row['speedup']:.2f}x eager, {row.get('speedup_vs_compile') or 0:.2f}x compile"
                 if row["status"] == "solved" else row.get("reason", "")[:160])
    summary = summarize(out, levels)
    (out / "summary.md").write_text(summary)
    if args.bundle:
        pack(out, Path(args.bundle))
    sys.stdout.write(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
