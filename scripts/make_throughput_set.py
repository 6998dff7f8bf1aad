"""A throughput candidate set: N honest NVRTC (CuPy) candidates per KernelBench problem, from the
offline proposer's generator with different kernel parameters (block size, vector width, …).

    python scripts/make_throughput_set.py --suite runs/kernelbench-upstream --level 1 \
        --problems 19,20,21,22,23,25,26,27,28,29,30,31,32,88 --per-problem 6 --out runs/tp_nvrtc

Writes OUT/level_{L}_problem_{N}_sample_{S}_kernel.py (the layout `kevolve bench --solutions` and
scripts/bench_throughput.py read). Runs on the CPU (tracing and code generation only).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", type=Path, required=True)
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--problems", required=True, help="comma-separated problem numbers")
    ap.add_argument("--per-problem", type=int, default=6)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from kevolve.offline.generate import plan
    from kevolve.offline.space import mutate
    from kevolve.kernelbench.suite import load_suite

    a.out.mkdir(parents=True, exist_ok=True)
    nums = [int(x) for x in a.problems.split(",")]
    suite = {sp.number: sp for sp in load_suite(a.suite, [a.level]) if sp.number in nums}
    rng = random.Random(a.seed)
    for n in nums:
        sp = suite.get(n)
        if sp is None or sp.problem is None:
            print(f"L{a.level}/{n}: not in the suite", file=sys.stderr)
            continue
        try:
            p = plan(sp.problem)
        except Exception as e:  # noqa: BLE001 - a problem the generator does not cover is skipped
            print(f"L{a.level}/{n}: {e}", file=sys.stderr)
            continue
        seen, params = set(), p.defaults()
        for s in range(a.per_problem * 4):
            src = p.source(params)
            if src not in seen:
                seen.add(src)
                (a.out / f"level_{a.level}_problem_{n}_sample_{len(seen) - 1}_kernel.py").write_text(src)
            if len(seen) >= a.per_problem:
                break
            params = p.legalize([mutate(x, f.group, rng) for x, f in zip(p.defaults(), p.fused, strict=True)])
        print(f"L{a.level}/{n} {sp.file}: {len(seen)} candidates")


if __name__ == "__main__":
    main()
