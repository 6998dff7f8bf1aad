"""Warm workers for a lane: the next evaluations' workers start up while this one is timed.

A sandbox worker spends seconds importing torch and creating its CUDA context before it can take a
job. `WarmWorkers` is a `LocalSandbox.workers` factory that keeps `spares` workers started ahead
for its lane's device. They start on the spare cores (a spawner thread pinned there, whose
affinity their processes inherit), so their start-up never competes with a candidate being timed,
and each is moved, every thread of its process group, onto the lane's cores when it is handed out.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.isolation import WorkerProcess

log = logging.getLogger(__name__)


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


class WarmWorkers:
    """Callable `(config) -> started WorkerProcess`, served from spares started ahead."""

    def __init__(self, spares: int, spare_cores: set[int], lane_cores: set[int]) -> None:
        self.spares, self.lane_cores = spares, lane_cores
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawner",
                                        initializer=lambda: os.sched_setaffinity(0, spare_cores))
        self._ready: deque[tuple[tuple[str, str], Future[WorkerProcess]]] = deque()
        self._lock = threading.Lock()
        self.served_warm = 0

    @staticmethod
    def _key(config: SandboxConfig) -> tuple[str, str]:
        return (config.device, config.model_dump_json(include={"isolation", "scratch_limit_gb", "cache_dir"}))

    @staticmethod
    def _start(config: SandboxConfig) -> WorkerProcess:
        from kevolve.sandbox.bwrap import local_launcher

        return WorkerProcess(config.device, launcher=local_launcher(config),
                             scratch_limit_gb=config.scratch_limit_gb).start()

    def __call__(self, config: SandboxConfig) -> WorkerProcess:
        key = self._key(config)
        with self._lock:
            fut = None
            while self._ready:
                k, f = self._ready.popleft()
                if k == key:
                    fut = f
                    break
                f.add_done_callback(_discard)  # started for another config
            while len(self._ready) < self.spares:
                self._ready.append((key, self._pool.submit(self._start, config)))
        if fut is None:
            worker = self._start(config)  # cold, on the lane's cores
        else:
            worker = fut.result()
            self.served_warm += 1
        if worker.proc is not None:
            pin_group(worker.proc.pid, self.lane_cores)
        return worker

    def close(self) -> None:
        with self._lock:
            ready, self._ready = list(self._ready), deque()
        for _, f in ready:
            f.add_done_callback(_discard)
        self._pool.shutdown(wait=False, cancel_futures=True)


def _discard(fut: Future[WorkerProcess]) -> None:
    if fut.cancelled() or fut.exception() is not None:
        return
    worker = fut.result()
    worker.kill()
    shutil.rmtree(worker.scratch, ignore_errors=True)


__all__ = ["WarmWorkers", "pin_group"]
