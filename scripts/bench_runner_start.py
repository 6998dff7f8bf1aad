"""What a runner's warm start costs, stage by stage, alone and with N starting at once (GPU or CPU).

    python3 -P scripts/bench_runner_start.py --device cuda --parallel 1,4,8 [--primed]

Each stage is what `sandbox/runner/serve.py`'s main() does before it reports warm: import torch (and
torch.utils.cpp_extension), make the device ready, the profiler's first use (`profile.warm_up`).
Prints one row per (parallel, stage): the median and the slowest of the N processes' seconds.
--primed: as runners start since sandbox/isolate/pycache.py, reading bytecode primed once (the priming itself,
if the prefix was not primed yet, is timed and printed first); without it, with PYTHONDONTWRITEBYTECODE=1
and no prefix, as runners started before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
t = [time.perf_counter()]
import torch, torch.utils.cpp_extension
t.append(time.perf_counter())
dev = torch.device(sys.argv[1])
if dev.type == "cuda":
    torch.empty(1, device=dev)
t.append(time.perf_counter())
from kevolve.sandbox.common.profile import warm_up
warm_up(dev)
t.append(time.perf_counter())
print(json.dumps([b - a for a, b in zip(t, t[1:])]))
"""
STAGES = ("import torch", "device ready", "profiler warm-up")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--parallel", default="1,4,8")
    ap.add_argument("--primed", action="store_true", help="read bytecode primed by sandbox/isolate/pycache.py")
    a = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if a.primed:
        from kevolve.sandbox.isolate import pycache

        t0 = time.perf_counter()
        where = pycache.prime(pycache.default_root())
        print(f"primed {where} in {time.perf_counter() - t0:.2f} s")
        env.update(pycache.env())
    print("| primed | at once | stage | median s | slowest s |\n|---|---|---|---|---|")
    for n in (int(x) for x in a.parallel.split(",")):
        procs = [subprocess.Popen([sys.executable, "-P", "-c", CHILD, a.device], stdout=subprocess.PIPE, text=True,
                                  env=env)
                 for _ in range(n)]
        rows = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        for i, name in enumerate(STAGES + ("total",)):
            xs = [sum(r) if name == "total" else r[i] for r in rows]
            print(f"| {'yes' if a.primed else 'no'} | {n} | {name} | {statistics.median(xs):.2f} | {max(xs):.2f} |", flush=True)


if __name__ == "__main__":
    main()
