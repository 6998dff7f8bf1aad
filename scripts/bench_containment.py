"""Which worker containment this machine gets, what it costs, and whether it holds (stdlib only).

    python3 -P scripts/bench_containment.py [--rounds 20] [--out DIR]

Runs from a bare checkout (no install, no torch: the GPU machines' Python has neither by default).
For each containment kind usable here (cgroup v2, child subreaper, process group), `--rounds`
times: spawn `true` through the containment's prefix and wait (the set-up cost a worker start
pays), then spawn tests/integration/escaper.py (a setsid double-fork daemon, a new-session Popen,
a forking loop), kill it as `WorkerProcess.kill()` does, and count the processes carrying its
marker afterwards. Prints one JSON line per kind (medians in ms) and writes containment.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import types
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _import_checkout() -> types.ModuleType:
    """kevolve.sandbox.isolate.containment from this checkout (it needs nothing beyond the standard library)."""
    try:
        from kevolve.sandbox.isolate import containment
    except ImportError:
        for name, path in (("kevolve", ROOT / "kevolve"), ("kevolve.sandbox", ROOT / "sandbox")):
            mod = types.ModuleType(name)
            mod.__path__ = [str(path)]  # type: ignore[attr-defined]
            sys.modules[name] = mod
        from kevolve.sandbox.isolate import containment
    return containment


def _marked(mark: str) -> int:
    n = 0
    for p in os.listdir("/proc"):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                n += mark.encode() in f.read()
        except OSError:
            continue
    return n


def _one_escape(c: types.ModuleType, kind: object, escaper: str) -> tuple[float, int]:
    """(ms to kill, processes left) for one escaper run under `kind`."""
    mark = f"kevolve-bench-{uuid.uuid4().hex}"
    scratch = Path(tempfile.mkdtemp(prefix="kevolve-bench-"))
    box = c.contain(scratch.name, kind)
    proc = subprocess.Popen(box.wrap([sys.executable, "-c", escaper, mark, "stay"]), cwd=scratch,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    box.started(proc.pid)
    while not (scratch / "ready").exists() and proc.poll() is None:
        time.sleep(0.02)
    t0 = time.perf_counter()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    box.kill_all()
    ms = (time.perf_counter() - t0) * 1e3
    time.sleep(0.2)
    left = _marked(mark)
    while _marked(mark):  # clean up what escaped (process group kind), again while it still forks
        for p in os.listdir("/proc"):
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if mark.encode() in f.read():
                        os.kill(int(p), signal.SIGKILL)
            except (OSError, ValueError):
                continue
        time.sleep(0.05)
    return ms, left


def measure(c: types.ModuleType, kind: object, rounds: int) -> dict[str, object]:
    escaper = (ROOT / "tests" / "integration" / "escaper.py").read_text()
    spawn, kill, left = [], [], []
    for _ in range(rounds):
        box = c.contain(f"bench-{uuid.uuid4().hex[:8]}", kind)
        t0 = time.perf_counter()
        subprocess.run(box.wrap(["true"]), check=True)
        spawn.append((time.perf_counter() - t0) * 1e3)
        box.kill_all()
        ms, n = _one_escape(c, kind, escaper)
        kill.append(ms)
        left.append(n)
    t0 = time.perf_counter()
    for _ in range(rounds):
        subprocess.run(["true"], check=True)
    bare = (time.perf_counter() - t0) * 1e3 / rounds
    return {"kind": str(kind), "rounds": rounds, "spawn_true_ms": round(statistics.median(spawn), 2),
            "bare_true_ms": round(bare, 2), "kill_all_ms": round(statistics.median(kill), 2),
            "left_after_kill_max": max(left)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    c = _import_checkout()
    choice = c.choose()
    print(json.dumps({"chosen": str(choice.kind), "detail": choice.detail,
                      "passed_over": [[str(k), why] for k, why in choice.passed_over],
                      "euid": os.geteuid(), "kernel": os.uname().release}), flush=True)
    order = list(c.ContainmentKind)
    rows = [measure(c, k, args.rounds) for k in order[order.index(choice.kind):]]
    for r in rows:
        print(json.dumps(r), flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "containment.json").write_text(json.dumps({"choice": str(choice.kind), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
