"""Build every extension of a solution folder's candidates into a kevolve cache, as `kevolve bench`'s build service
would (same recipe, cache layout, isolation), with all of this machine's cores: a build cache made ahead, so that a
throughput run measures evaluations, not compilers (scripts/gpu_two_lanes.sh).

    python3 -P scripts/prebuild_set.py --solutions runs/lbmix/solutions --cache-dir runs/lbmix-work/kevolve-cache

Prints one line: candidates, extensions, built / cached / failed or declined, wall seconds, workers.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--solutions", type=Path, required=True, help="folder of candidate .py files")
    ap.add_argument("--cache-dir", type=Path, required=True, help="the cache `kevolve bench --cache-dir` will read")
    ap.add_argument("--device", default="cuda:0", help="cuda:N builds for that GPU's architecture; cpu builds C++")
    ap.add_argument("--workers", type=int, default=0, help="parallel builds (default: half the cores)")
    args = ap.parse_args()
    files = sorted(args.solutions.glob("*.py")) if args.solutions.is_dir() else []
    if not files:
        print(f"error: --solutions {args.solutions}: no .py files", file=sys.stderr)
        return 2
    from kevolve.sandbox.build.recipe import BuildTarget
    from kevolve.sandbox.build.service import BuildService, gpu_arch

    workers = args.workers or max(1, (os.cpu_count() or 2) // 2)
    t0 = time.monotonic()
    from kevolve.sandbox.config import BWRAP_ENV

    service = BuildService(args.cache_dir, BuildTarget.current(gpu_arch(args.device)), workers=workers,
                           max_pch=4 if workers > 1 else 0, bwrap=os.environ.get(BWRAP_ENV) or None)
    try:
        service.warm()
        futures = [f for p in files for f in service.submit_source(p.read_text())]
        results = [f.result() for f in futures]
    finally:
        service.close()
    counts = Counter(r.status.value for r in results)
    for r in results:
        if not r.ok:
            print(f"  {r.key[:12]} {r.status.value}: {(r.log_tail.strip().splitlines() or [''])[-1][:160]}", flush=True)
    print(f"prebuild: {len(files)} candidates, {len(results)} extensions: "
          f"{', '.join(f'{k} {n}' for k, n in sorted(counts.items())) or 'none'}; "
          f"{time.monotonic() - t0:.1f} s with {workers} workers", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
