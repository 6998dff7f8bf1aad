"""CPU cores: which ones time evaluations, which ones build and warm up, and pinning processes there.

A process pinned to one core that lets torch start its default thread count puts all those
threads on that core: measured on the H100 machine (16 cores), a comparison of two 1024×2048
tensors took 2,527 ms from a thread pinned to one core instead of 9 ms — the 54 s "compare" phase
of issue 12. So whoever pins a process also sets its thread count to the cores it got.
"""

from __future__ import annotations

import os


def split_cores(n_lanes: int, compile_workers: int, cores: list[int] | None = None) -> tuple[list[set[int]], set[int]]:
    """Disjoint core sets: one per evaluation lane, and one for the compile pool (may be empty)."""
    cores = sorted(cores if cores is not None else os.sched_getaffinity(0))
    n_compile = max(0, min(compile_workers, len(cores) - n_lanes))
    eval_cores, compile_cores = cores[: len(cores) - n_compile], set(cores[len(cores) - n_compile:])
    per = max(1, len(eval_cores) // n_lanes)
    lanes = [set(eval_cores[i * per:(i + 1) * per]) or {eval_cores[i % len(eval_cores)]} for i in range(n_lanes)]
    return lanes, compile_cores


def pin_group(pgid: int, cores: set[int]) -> int:
    """Every thread of every process in a process group onto `cores`; returns how many threads."""
    pinned = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[2]) != pgid:
                    continue
            tids = os.listdir(f"/proc/{pid}/task")
        except (OSError, IndexError, ValueError):
            continue
        for tid in tids:
            try:
                os.sched_setaffinity(int(tid), cores)
                pinned += 1
            except OSError:
                pass  # a thread that just ended
    return pinned


__all__ = ["pin_group", "split_cores"]
