"""Warm workers: started ahead on the spare cores, handed out (all threads) on the lane's cores."""

from __future__ import annotations

import os
import time

import pytest

from kevolve.kernelbench.warm import WarmWorkers, pin_group

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")


def threads_affinity(pid: int) -> set[frozenset[int]]:
    found = set()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[2]) != pid:
                    continue
            for tid in os.listdir(f"/proc/{p}/task"):
                found.add(frozenset(os.sched_getaffinity(int(tid))))
        except (OSError, ValueError):
            continue
    return found


def test_spares_start_on_spare_cores_and_serve_on_the_lane_cores(cpu_config) -> None:
    lane, spare = {sorted(os.sched_getaffinity(0))[0]}, {sorted(os.sched_getaffinity(0))[1]}
    pool = WarmWorkers(1, spare, lane)
    first = second = None
    try:
        first = pool(cpu_config)  # nothing warm yet: started cold, and one spare behind it
        assert pool.served_warm == 0
        time.sleep(3.0)  # the spare imports torch meanwhile
        [(_, fut)] = list(pool._ready)
        ahead = fut.result()
        assert threads_affinity(ahead.proc.pid) == {frozenset(spare)}  # warming up away from the lane
        second = pool(cpu_config)
        assert second is ahead and pool.served_warm == 1
        assert threads_affinity(second.proc.pid) == {frozenset(lane)}  # every thread moved to the lane
        assert second.proc.poll() is None  # alive and waiting for its job
    finally:
        for w in (first, second):
            if w is not None:
                w.kill()
        pool.close()


def test_pin_group_of_a_missing_group_pins_nothing() -> None:
    assert pin_group(2**22 + 12345, {0}) == 0
