"""A problem's reference set-up (the judge's `oracle.prepare`: draws, float64 truth, host copies), phase by phase.

    python3 -P scripts/bench_reference.py PROBLEM.py [--device cuda] [--cores 1] [--alloc-conf STR] [--json OUT]

Runs `prepare` exactly as the judge does (sandbox/judge/serve.py: the same seed rule, n_draws, memory limit), in this
process, pinned to --cores cores (the judge of a one-GPU bench on 16 cores has one: every other core compiles), with
PyTorch's allocator settings --alloc-conf set before anything is allocated (e.g. the pinned host allocator's
`pinned_use_cuda_host_register:True,pinned_num_register_threads:8`). Prints `reference_*` seconds, the truth's parts
(`reference_truth_f64`, `_errors`, `_host`), the residency and the draws kept. Issue 36: KernelBench L1 19 (ReLU,
4096 x 393216 fp32) spent 47.9 s in `reference_truth` on an H200; run it once per setting, each in a fresh process:

    for c in "" "pinned_use_cuda_host_register:True,pinned_num_register_threads:8"; do
      python3 -P scripts/bench_reference.py runs/lbmix/kernelbench/KernelBench/level1/19_ReLU.py --pin-probe 6.4 \
        --alloc-conf "$c"; done
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def pin_probe(nbytes: int, device: object) -> dict[str, float]:
    """Seconds for one pinned host allocation of `nbytes` (rounded up by torch's allocator) and a copy into it."""
    import torch

    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    dst = torch.empty(nbytes // 4, dtype=torch.float32, pin_memory=True)
    t1 = time.perf_counter()
    dst.copy_(src)
    torch.cuda.synchronize(device)
    t2 = time.perf_counter()
    pageable = torch.empty(nbytes // 4, dtype=torch.float32)
    pageable.copy_(src)
    t3 = time.perf_counter()
    del src, dst, pageable
    return {"gb": nbytes / 1e9, "pinned_alloc_s": round(t1 - t0, 3), "pinned_copy_s": round(t2 - t1, 3),
            "pageable_alloc_and_copy_s": round(t3 - t2, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--cores", type=int, default=1, help="cores this process runs on (the first N it may use)")
    ap.add_argument("--alloc-conf", default="", help="torch allocator settings, set before any allocation")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", type=Path, default=None, help="also write the result here")
    ap.add_argument("--pin-probe", type=float, default=0.0, metavar="GB",
                    help="first, time one pinned host allocation of GB (torch.empty(pin_memory=True)) and a device "
                         "to host copy into it, on the same cores and settings")
    a = ap.parse_args()
    if not a.problem.is_file():
        print(f"error: {a.problem}: no such file", file=sys.stderr)
        return 2
    if a.pin_probe > 0 and not a.device.startswith("cuda"):
        print("error: --pin-probe needs --device cuda (pinned host memory is CUDA's)", file=sys.stderr)
        return 2
    cores = sorted(os.sched_getaffinity(0))[: max(1, a.cores)]
    os.sched_setaffinity(0, cores)
    import torch

    from kevolve.contract import ProblemError, load_problem
    from kevolve.sandbox.common.harness import StageError
    from kevolve.sandbox.config import SandboxConfig
    from kevolve.sandbox.judge.oracle import prepare
    from kevolve.sandbox.judge.residency import release_pinned

    if a.alloc_conf:
        try:
            torch.cuda.memory._set_allocator_settings(a.alloc_conf)
        except (RuntimeError, AttributeError) as e:
            print(f"error: --alloc-conf {a.alloc_conf!r}: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                  file=sys.stderr)
            return 2
    torch.set_num_threads(len(cores))
    try:
        problem = load_problem(a.problem)
    except ProblemError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    config = SandboxConfig()
    device = torch.device(a.device)
    probe = pin_probe(int(a.pin_probe * 1e9), device) if a.pin_probe > 0 else None
    release_pinned()  # the probe's block is not reused by the problem's copies
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kevolve-bench-reference-") as scratch:
        try:
            state = prepare(problem, a.seed, config.n_draws, device, Path(scratch),
                            memory_limit=int(config.memory_limit_gb * 2**30))
        except StageError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        wall = time.perf_counter() - t0
        out = {"problem": a.problem.name, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               "torch": torch.__version__, "cores": len(cores), "alloc_conf": a.alloc_conf, "wall_s": round(wall, 3),
               "residency": state.residency, "draws": list(state.draws),
               "phase_s": {k: round(v, 3) for k, v in state.phase_s.items()}, "pin_probe": probe}
        t1 = time.perf_counter()
        del state
        release_pinned()
        out["release_s"] = round(time.perf_counter() - t1, 3)
    print(json.dumps(out, indent=1))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
