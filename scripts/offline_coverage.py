#!/usr/bin/env python3
"""CPU coverage of the offline proposer over a KernelBench checkout (no GPU needed).

    python scripts/offline_coverage.py --suite .kb --levels 1,2 --out runs/offline_coverage

For every problem: trace -> partition -> codegen -> emit at the real shapes, NVRTC-compile every
generated kernel for compute_90 (defaults and every row strategy), and check the IR against the
module's eager output on the CPU at shrunk sizes (`kevolve.offline.graph.shrink`). Prints one line
per problem (covered, or the one-line reason not) and the totals per level; writes OUT/coverage.jsonl
and OUT/coverage.md. Each problem runs in its own child process with a time limit. This is CPU coverage,
not a GPU result: a covered problem can still be slow or fail on the GPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
from pathlib import Path

log = logging.getLogger("offline_coverage")


def summary(rows: list[dict], levels: list[int]) -> str:
    """Per-level totals and the not-covered reasons, as Markdown."""
    lines = ["| level | problems | covered | share | no candidate | IR mismatch | compile error | policy | check failed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for lv in levels:
        rs = [r for r in rows if r["level"] == lv]
        c = Counter(r["verdict"] for r in rs)
        share = f"{100 * c['covered'] / len(rs):.0f}%" if rs else "n/a"
        lines.append(f"| {lv} | {len(rs)} | {c['covered']} | {share} | {c['no_candidate']} | {c['ir_mismatch']} | "
                     f"{c['compile_error']} | {c['policy']} | {c['check_failed']} |")
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
    ap.add_argument("--jobs", type=int, default=1, help="problems checked at once (child processes)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    from kevolve.offline.coverage import check_files
    from kevolve.kernelbench.suite import load_suite

    levels = [int(x) for x in args.levels.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    suite = {sp.key: sp for sp in load_suite(args.suite, levels, args.problems, args.match)}
    items = [(key, sp.path if sp.problem is not None else None, sp.unavailable) for key, sp in suite.items()]
    for key, got in check_files(items, args.timeout, args.jobs):
        sp = suite[key]
        row = {"key": key, "level": sp.level, "number": sp.number} | got
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
