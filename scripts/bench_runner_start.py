"""What a runner's warm start costs, stage by stage, alone and with N starting at once (GPU or CPU).

    python3 -P scripts/bench_runner_start.py --device cuda --parallel 1,4,8

Each stage is what `sandbox/runner.py`'s main() does before it reports warm: import torch (and
torch.utils.cpp_extension), make the device ready, the profiler's first use (`profile.warm_up`).
Prints one row per (parallel, stage): the median and the slowest of the N processes' seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
t = [time.perf_counter()]
import torch, torch.utils.cpp_extension
t.append(time.perf_counter())
dev = torch.device(sys.argv[1])
if dev.type == "cuda":
    torch.empty(1, device=dev)
t.append(time.perf_counter())
from kevolve.sandbox.profile import warm_up
warm_up(dev)
t.append(time.perf_counter())
print(json.dumps([b - a for a, b in zip(t, t[1:])]))
"""
STAGES = ("import torch", "device ready", "profiler warm-up")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--parallel", default="1,4,8")
    a = ap.parse_args()
    print("| at once | stage | median s | slowest s |\n|---|---|---|---|")
    for n in (int(x) for x in a.parallel.split(",")):
        procs = [subprocess.Popen([sys.executable, "-P", "-c", CHILD, a.device], stdout=subprocess.PIPE, text=True)
                 for _ in range(n)]
        rows = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        for i, name in enumerate(STAGES + ("total",)):
            xs = [sum(r) if name == "total" else r[i] for r in rows]
            print(f"| {n} | {name} | {statistics.median(xs):.2f} | {max(xs):.2f} |", flush=True)


if __name__ == "__main__":
    main()
