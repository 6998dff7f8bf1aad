"""The judge's per-call comparison of an output with its truth, torch path vs the one-pass kernel (GPU).

    python3 -P scripts/bench_compare.py --elements 1610612736     # KernelBench L1 activations: 6.4 GB

Times `correctness.compare_one` (what the judge runs on every call) with KEVOLVE_FUSED_COMPARE off and
on, on one output of that size and a truth 1e-3 away, the one-pass kernel also with the fingerprint
`checks.check_call` takes from it; also `checks.fingerprint` alone (the torch path's extra pass) and a
copy of the truth from pinned host memory (what a host-resident problem pays when its truth is not on
the device). Prints a markdown table; both paths must reach the same verdict.

    python3 -P scripts/bench_compare.py --first --elements 1048576

instead times each path's first call in a fresh process (as a judge's first comparison of an evaluation pays it:
the one-pass kernel's Triton build, the torch ops' first launches), then its second.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch


def timed(fn, reps: int) -> list[float]:  # noqa: ANN001
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--elements", type=int, default=4096 * 393216)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--first", action="store_true", help="each path's first call, in a fresh process")
    ap.add_argument("--one", choices=["0", "1"], help=argparse.SUPPRESS)  # --first's child: one path
    args = ap.parse_args()
    if args.first:
        print("| path | first call s | second call ms |\n|---|---|---|")
        for mode in ("1", "0", "1", "0"):
            r = subprocess.run([sys.executable, "-P", __file__, "--one", mode, "--elements", str(args.elements),
                                "--dtype", args.dtype], capture_output=True, text=True, timeout=300, check=True)
            print(r.stdout.strip())
        return
    from kevolve.sandbox.judge import fused_compare
    from kevolve.sandbox.judge.checks import fingerprint
    from kevolve.sandbox.judge.correctness import compare_one

    dt = getattr(torch, args.dtype)
    g = torch.Generator(device="cuda").manual_seed(1)
    t = torch.randn(args.elements, device="cuda", generator=g, dtype=torch.float32).to(dt)
    c = (t.float() * (1 + 1e-3 * torch.randn(args.elements, device="cuda", generator=g))).to(dt)
    err = ((1e-3, 1e-3, 0.0),)
    if args.one:
        os.environ["KEVOLVE_FUSED_COMPARE"] = "all" if args.one == "1" else args.one
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        compare_one("k", [c], [t], err, 8.0, [])
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        second = timed(lambda: compare_one("k", [c], [t], err, 8.0, []), 1)[0]
        name = "one-pass kernel" if args.one == "1" else "torch ops"
        print(f"| {name} ({args.elements} {args.dtype}) | {first:.3f} | {second:.2f} |")
        return
    rows, verdicts = [], {}
    for mode in ("0", "1"):
        os.environ["KEVOLVE_FUSED_COMPARE"] = "all" if mode == "1" else mode  # every size: the kernel's own cost
        compare_one("k", [c], [t], err, 8.0)  # warm: Triton builds its kernel on the first call
        verdicts[mode] = compare_one("k", [c], [t], err, 8.0)[0]
        ms = timed(lambda: compare_one("k", [c], [t], err, 8.0), args.reps)
        rows.append(("compare_one, " + ("one-pass kernel" if mode == "1" else "torch ops"), ms))
        if mode == "1":  # as checks.check_call runs it: the fingerprint from the comparison's own pass
            rows.append(("compare_one + fingerprint, one-pass kernel", timed(lambda: compare_one("k", [c], [t], err, 8.0, []),
                                                                            args.reps)))
    assert fused_compare._broken is None, fused_compare._broken
    rows.append(("fingerprint alone (torch ops; the torch path's extra pass)", timed(lambda: fingerprint([c]), args.reps)))
    host = t.cpu().pin_memory()
    rows.append(("truth from pinned host memory", timed(lambda: host.to("cuda", non_blocking=False), args.reps)))
    gb = args.elements * t.element_size() / 1e9
    print(f"{args.elements} {args.dtype} elements ({gb:.2f} GB per tensor), {torch.cuda.get_device_name()}")
    print(f"verdicts: torch ops {verdicts['0'].passed} ({verdicts['0'].detail}); "
          f"one pass {verdicts['1'].passed} ({verdicts['1'].detail})")
    print("| step | median ms | min ms | GB/s over output + truth |\n|---|---|---|---|")
    for name, ms in rows:
        print(f"| {name} | {statistics.median(ms):.2f} | {min(ms):.2f} | {2 * gb / (statistics.median(ms) / 1e3):.0f} |")
    assert verdicts["0"].passed == verdicts["1"].passed


if __name__ == "__main__":
    main()
