#!/usr/bin/env python3
"""CPU coverage of the offline proposer over a KernelBench checkout (no GPU needed).

    python scripts/offline_coverage.py --suite .kb --levels 1,2 --out runs/offline_coverage

For every problem: trace -> partition -> codegen -> emit at the real shapes, NVRTC-compile every
generated kernel for compute_90 (defaults and every row strategy), and check the IR against the
module's eager output on the CPU at shrunk sizes (`kevolve.agent.offline.shrink`). Prints one line
per problem (covered, or the one-line reason not) and the totals per level; writes OUT/coverage.jsonl
and OUT/coverage.md. Each problem runs in a forked child with a time limit. This is CPU coverage,
not a GPU result: a covered problem can still be slow or fail on the GPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

log = logging.getLogger("offline_coverage")


def _child(path: str, level: int, conn) -> None:
    from kevolve.agent.offline.coverage import Coverage, Verdict, check
    from kevolve.agent.offline.shrink import shrink
    from kevolve.kernelbench.problem import load_problem, problem_from_source

    try:
        problem = load_problem(path)
        try:
            shrunk = problem_from_source(shrink(problem.source), path)
        except Exception as e:  # noqa: BLE001 — reported only if the IR check is reached
            shrunk = None
            log.info("%s: not shrunk (%s: %s)", path, type(e).__name__, e)
        cov = check(problem, shrunk)
    except Exception as e:  # noqa: BLE001
        cov = Coverage(Verdict.CHECK_FAILED, f"{type(e).__name__}: {e}"[:300])
    conn.send(asdict(cov))
    conn.close()


def run_one(path: str, level: int, timeout: float) -> dict:
    """The coverage record of one problem file, checked in a forked child (killed after `timeout` s)."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    t0 = time.monotonic()
    proc = ctx.Process(target=_child, args=(path, level, send), daemon=True)
    proc.start()
    send.close()
    got = recv.recv() if recv.poll(timeout) else None
    proc.join(5)
    if proc.is_alive():
        proc.kill()
        proc.join()
    if got is None:
        why = f"timed out after {timeout:.0f} s" if proc.exitcode in (None, -9) else f"child died (exit {proc.exitcode})"
        got = {"verdict": "check_failed", "reason": why, "groups": [], "max_err": None, "sources": 0}
    got["seconds"] = round(time.monotonic() - t0, 2)
    return got


def summary(rows: list[dict], levels: list[int]) -> str:
    """Per-level totals and the not-covered reasons, as Markdown."""
    lines = ["| level | problems | covered | share | no candidate | IR mismatch | compile error | check failed |",
             "|---|---|---|---|---|---|---|---|"]
    for lv in levels:
        rs = [r for r in rows if r["level"] == lv]
        c = Counter(r["verdict"] for r in rs)
        share = f"{100 * c['covered'] / len(rs):.0f}%" if rs else "n/a"
        lines.append(f"| {lv} | {len(rs)} | {c['covered']} | {share} | {c['no_candidate']} | {c['ir_mismatch']} | "
                     f"{c['compile_error']} | {c['check_failed']} |")
    lines += ["", "Not covered:", ""]
    lines += [f"- {r['key']}: {r['verdict']}: {r['reason']}" for r in rows if r["verdict"] != "covered"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", required=True, help="KernelBench checkout (or a folder with level1/, level2/)")
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--problems", default=None, help="problem numbers, e.g. '1-10,19' (default: all)")
    ap.add_argument("--match", default=None, help="regular expression on the file name")
    ap.add_argument("--out", default="runs/offline_coverage")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per problem")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    import torch  # noqa: F401 — imported once here, so each forked child starts with it loaded
    from kevolve.kernelbench.suite import load_suite

    levels = [int(x) for x in args.levels.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for sp in load_suite(args.suite, levels, args.problems, args.match):
        if sp.problem is None:
            row = {"verdict": "check_failed", "reason": sp.unavailable, "groups": [], "seconds": 0.0}
        else:
            row = run_one(sp.path, sp.level, args.timeout)
        row = {"key": sp.key, "level": sp.level, "number": sp.number} | row
        rows.append(row)
        tail = "" if row["verdict"] == "covered" else f": {row['reason']}"
        print(f"{sp.key}: {row['verdict']}{tail} ({row['seconds']:.1f} s)", flush=True)
    (out / "coverage.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = summary(rows, levels)
    (out / "coverage.md").write_text(text)
    print(text.split("\n\nNot covered:")[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
