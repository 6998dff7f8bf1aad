"""What a user calling a module alone sees: end-to-end, host-side and device time of a forward, in a
plain process (no kevolve harness), for the eager reference and a candidate.

    python3 -P scripts/e2e_time.py PROBLEM.py CANDIDATE.py [--calls 50]

Per module, medians over --calls calls:
  e2e     synchronize, call, synchronize (the judge's clock in the audit measures this, less its channel);
  kb      CUDA events around the call after a synchronize (KernelBench's timer: the GPU idles while the
          host launches, so launch overhead counts);
  host    the call's host time with the GPU queue pre-filled by a sleep kernel (launch overhead alone);
  device  CUDA events around the call with the queue pre-filled (kevolve's timer: launch overhead hidden).
Prints one line per module and the candidate's speedup by each timer, and the Python garbage
collections that ran during each module's calls (count by generation, total ms); --no-gc measures with
the collector off; --profile N adds where the candidate's host time goes (cProfile over N calls, the
queue pre-filled). Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import time


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        sys.exit(f"error: {path}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class GcWatch:
    """Collections by generation and their total time while it is on (gc.callbacks)."""

    def __init__(self) -> None:
        self.counts, self.ms, self._t0 = [0, 0, 0], 0.0, 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.counts[info["generation"]] += 1
            self.ms += (time.perf_counter() - self._t0) * 1e3

    def __enter__(self) -> "GcWatch":
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)

    def __str__(self) -> str:
        return f"gc {'/'.join(map(str, self.counts))} collections, {self.ms:.2f} ms"


def measure(fn, inputs, calls: int) -> dict[str, float]:
    import torch

    for _ in range(5):
        fn(*inputs)
    torch.cuda.synchronize()
    out: dict[str, list[float]] = {"e2e": [], "kb": [], "host": [], "device": []}
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(*inputs)
        torch.cuda.synchronize()
        out["e2e"].append((time.perf_counter() - t0) * 1e3)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        fn(*inputs)
        b.record()
        torch.cuda.synchronize()
        out["kb"].append(a.elapsed_time(b))
        torch.cuda._sleep(20_000_000)  # ~10 ms of GPU queue ahead of the call
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        t0 = time.perf_counter()
        fn(*inputs)
        out["host"].append((time.perf_counter() - t0) * 1e3)
        b.record()
        torch.cuda.synchronize()
        out["device"].append(a.elapsed_time(b))
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problem")
    ap.add_argument("candidate")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--no-gc", action="store_true", help="measure with Python's garbage collector off")
    a = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("error: no CUDA device")
    prob = load(a.problem, "kv_e2e_problem")
    cand = load(a.candidate, "kv_e2e_candidate")
    torch.manual_seed(0)
    init = [x.cuda() if isinstance(x, torch.Tensor) else x for x in prob.get_init_inputs()]
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
    with torch.no_grad():
        ref = prob.Model(*init).cuda().eval()
        new = cand.ModelNew(*init).cuda().eval()
        if a.no_gc:
            gc.collect()
            gc.disable()
        with GcWatch() as gr:
            r = measure(ref, inputs, a.calls)
        with GcWatch() as gcand:
            c = measure(new, inputs, a.calls)
    for name, m, w in (("eager", r, gr), ("candidate", c, gcand)):
        print(f"{name:10} " + "  ".join(f"{k} {v:.4f} ms" for k, v in m.items()) + f"  ({w})")
    print("speedup    " + "  ".join(f"{k} {r[k] / c[k]:.3f}x" for k in ("e2e", "kb", "device")))
    if a.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        with torch.no_grad():
            for _ in range(a.profile):
                torch.cuda._sleep(2_000_000)
                prof.enable()
                new(*inputs)
                prof.disable()
            torch.cuda.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
