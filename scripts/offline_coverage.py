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
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

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


class Child:
    """One problem being checked in a forked child process."""

    def __init__(self, path: str, level: int) -> None:
        ctx = mp.get_context("fork")
        self.recv, send = ctx.Pipe(duplex=False)
        self.t0 = time.monotonic()
        self.proc = ctx.Process(target=_child, args=(path, level, send), daemon=True)
        self.proc.start()
        send.close()

    def result(self, timeout: float) -> dict | None:
        """The coverage record once the child has answered, died or run past `timeout`; else None."""
        got = self.recv.recv() if self.recv.poll(0) else None
        late = time.monotonic() - self.t0 > timeout
        if got is None and self.proc.is_alive() and not late:
            return None
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        if got is None:
            why = f"timed out after {timeout:.0f} s" if late else f"child died (exit {self.proc.exitcode})"
            got = {"verdict": "check_failed", "reason": why, "groups": [], "max_err": None, "sources": 0}
        got["seconds"] = round(time.monotonic() - self.t0, 2)
        return got


def run_all(suite: list, timeout: float, jobs: int) -> Iterator[tuple[Any, dict]]:
    """Coverage records in suite order, `jobs` children at a time."""
    pending, running, done = list(suite), {}, {}
    order = [sp.key for sp in suite]
    while pending or running:
        while pending and len(running) < jobs:
            sp = pending.pop(0)
            if sp.problem is None:
                done[sp.key] = (sp, {"verdict": "check_failed", "reason": sp.unavailable, "groups": [], "seconds": 0.0})
            else:
                running[sp.key] = (sp, Child(sp.path, sp.level))
        for key, (sp, child) in list(running.items()):
            got = child.result(timeout)
            if got is not None:
                done[key] = (sp, got)
                del running[key]
        while order and order[0] in done:
            yield done.pop(order.pop(0))
        time.sleep(0.05)


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
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per problem")
    ap.add_argument("--jobs", type=int, default=1, help="problems checked at once (forked children)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    import torch  # noqa: F401 — imported once here, so each forked child starts with it loaded
    from kevolve.kernelbench.suite import load_suite

    levels = [int(x) for x in args.levels.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for sp, got in run_all(load_suite(args.suite, levels, args.problems, args.match), args.timeout, args.jobs):
        row = {"key": sp.key, "level": sp.level, "number": sp.number} | got
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
