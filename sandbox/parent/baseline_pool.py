"""Several baseline workers prepare at once; one at a time is timed.

What costs time in `kevolve bench baselines` is CPU work: a worker's start-up (importing torch,
opening the device), the problem's set-up, and above all Inductor compiling the torch.compile
baseline (seconds per problem). Up to `jobs` workers do that side by side, each a different problem
(sandbox/judge/baseline_worker.py). The GPU timing stays exclusive: the pool hands one token out,
to the oldest prepared worker, and only that one is timed; by default every other worker is
paused (SIGSTOP on its process group) meanwhile, because preparing also runs GPU work (drawing
inputs, a first forward, Inductor's first call and autotuning) and loads the cores and memory
bandwidth the timed process uses. The timed worker runs on a core no preparing worker uses.

Memory decides how many prepare at once as well: each worker first estimates what its prepared
problem will hold (on the meta device) and is admitted, oldest first, only while the admitted
estimates fit the budget; a problem that does not fit waits until the ones ahead are done, and one
larger than the whole budget (or one that could not be estimated) runs alone.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kevolve.sandbox.judge.baseline_worker import BaselineWorker, pin_process
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.isolate.launch import _STARTUP_LIMIT_S, WorkerExit, _over_memory
from kevolve.sandbox.common.protocol import WorkerRequest

# A suite's problem record (kernelbench.suite.SuiteProblem): the pool only carries it through, and the
# sandbox does not import kernelbench/.
SuiteProblem = Any

log = logging.getLogger(__name__)

_POLL_S = 0.05
_SETTLE_S = 0.1  # after pausing workers that may have GPU work queued: let the device drain it
_CONTEXT_BYTES = 768 * 2**20  # what each worker's CUDA context and libraries hold on the device
_MARGIN_BYTES = 2 * 2**30
_MEMORY_CHECK_S = 1.0  # how often preparing workers' host memory is read (a walk of /proc each)


@dataclass(frozen=True)
class PoolSettings:
    """How many workers prepare at once, within what memory, and whether they pause while one is timed."""

    jobs: int = 1
    memory_budget: int = 0  # bytes of device memory (host memory on the CPU) the admitted problems may hold
    pause_prep: bool = True
    time_limit_s: float | None = None  # stop (problems left are pending) after this long


class PoolWorker(Protocol):
    """What the pool needs of a worker (BaselineWorker; tests use stand-ins)."""

    proc: subprocess.Popen[bytes] | None
    scratch: Path

    def need(self) -> tuple[bool, int | None]: ...
    def admit(self) -> None: ...
    def phase(self) -> str: ...
    def run(self, request: WorkerRequest, timeout_s: float, memory_limit_gb: float) -> WorkerExit: ...
    def kill(self) -> None: ...


Starter = Callable[[WorkerRequest, set[int], int], PoolWorker]  # (request, cores, compile threads) -> started worker


@dataclass(frozen=True)
class PoolResult:
    """How one problem's baseline worker ended."""

    problem: SuiteProblem
    exit: WorkerExit | None = None  # the timed (or failed) worker's exit
    failure: str = ""  # one line, when the pool itself stopped the worker (memory, time while preparing)
    pending: bool = False  # not measured: the time limit came first
    spawned_at: float | None = None  # wall clock (Unix seconds) when its worker was started


@dataclass
class _Slot:
    sp: SuiteProblem
    req: WorkerRequest
    worker: PoolWorker
    spawned_at: float
    deadline: float  # monotonic; moved on by the time the worker spends paused
    held: int = 0  # bytes of the budget reserved for it once admitted
    admitted: bool = False
    ready: bool = False


def admissible(need: int | None, held: int, budget: int) -> bool:
    """May a problem needing `need` bytes (None: unknown) prepare beside `held` bytes already admitted?"""
    if held == 0:
        return True  # nothing else admitted: even a problem larger than the budget runs, alone
    return need is not None and held + need <= budget


def default_jobs(cores: int) -> int:
    """Workers preparing at once: the cores less the timing core and one for this process, at most 12.

    A worker's preparation is mostly one thread (importing torch, Inductor's lowering; each gets
    one compile thread when several run, since a KernelBench problem compiles only a few kernels
    and Inductor's compile subprocesses would cost more to start than they save). Beyond 12, host
    memory (2-3 GB a worker) and the shared GPU, not cores, limit it."""
    return max(1, min(12, cores - 2))


def default_budget(device: str, jobs: int) -> int:
    """Device memory (host memory on the CPU) the admitted problems may hold, less what every worker's
    context holds and a margin; 0 (one problem at a time) when it cannot be read."""
    total = _gpu_total(device) if device.startswith("cuda") else _host_available() // 2
    return max(0, total - jobs * _CONTEXT_BYTES - _MARGIN_BYTES) if total else 0


def _gpu_total(device: str) -> int:
    index = device.split(":", 1)[1] if ":" in device else "0"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", index],
                             capture_output=True, text=True, timeout=30)
        return int(out.stdout.split()[0]) * 2**20 if out.returncode == 0 else 0
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return 0


def _host_available() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class BaselinePool:
    """Runs the baseline workers of `problems`; `results()` yields each as it finishes."""

    def __init__(self, problems: list[tuple[SuiteProblem, WorkerRequest]], config: SandboxConfig,
                 settings: PoolSettings, start: Starter | None = None) -> None:
        cores = sorted(os.sched_getaffinity(0))
        self.timing_cores, self.prep_cores = {cores[0]}, set(cores[1:]) or {cores[0]}
        self.compile_threads = max(1, len(self.prep_cores) // max(1, settings.jobs))
        self.todo = deque(problems)
        self.config, self.settings = config, settings
        self.live: list[_Slot] = []
        self.ready: deque[_Slot] = deque()
        self.stop_at = time.monotonic() + settings.time_limit_s if settings.time_limit_s else None
        self.memory_checked = 0.0
        self.start: Starter = start or (lambda req, cores, threads:
                                        BaselineWorker(config.device).prepare(req, cores, threads))

    def results(self) -> Iterator[PoolResult]:
        """Each problem's result, in the order they finish; problems left at the time limit come last, pending.

        This process keeps off the timing core meanwhile (its memory watcher reads /proc while a worker is timed).
        """
        own = os.sched_getaffinity(0)
        os.sched_setaffinity(0, self.prep_cores)
        try:
            while (self.todo or self.live) and not self._out_of_time():
                self._spawn()
                self._admit()
                yield from self._sweep()
                if self.ready:
                    yield self._time(self.ready.popleft())
                else:
                    time.sleep(_POLL_S)
        finally:
            for slot in self.live:
                self._discard(slot)
            left = [s.sp for s in self.live] + [sp for sp, _ in self.todo]
            self.live, self.todo = [], deque()
            os.sched_setaffinity(0, own)
        for sp in left:
            yield PoolResult(problem=sp, pending=True)

    def _out_of_time(self) -> bool:
        return self.stop_at is not None and time.monotonic() >= self.stop_at

    def _spawn(self) -> None:
        while self.todo and len(self.live) < self.settings.jobs:
            sp, req = self.todo.popleft()
            worker = self.start(req, self.prep_cores, self.compile_threads)
            limit = _STARTUP_LIMIT_S + self.config.timeout_s
            self.live.append(_Slot(sp=sp, req=req, worker=worker, spawned_at=time.time(),
                                   deadline=time.monotonic() + limit))

    def _admit(self) -> None:
        """Oldest first; one that does not fit holds back the ones behind it (no problem starves)."""
        held = sum(s.held for s in self.live)
        for slot in self.live:
            if slot.admitted:
                continue
            sized, need = slot.worker.need()
            if not sized:
                continue  # still starting (or dead: the sweep reports it)
            if not admissible(need, held, self.settings.memory_budget):
                return
            slot.held = need if need is not None else max(self.settings.memory_budget, 1)
            held += slot.held
            slot.admitted = True
            slot.worker.admit()

    def _sweep(self) -> Iterator[PoolResult]:
        """Move prepared workers to the ready queue; end the ones that died, overran or outgrew memory."""
        limit = int(self.config.memory_limit_gb * 2**30)
        check_memory = time.monotonic() - self.memory_checked >= _MEMORY_CHECK_S
        if check_memory:
            self.memory_checked = time.monotonic()
        for slot in list(self.live):
            if slot.ready:
                continue
            proc = slot.worker.proc
            assert proc is not None
            if proc.poll() is not None or (slot.admitted and slot.worker.phase() == "waiting"):
                slot.ready = True  # a dead worker is "run" too: its exit says where it died
                self.ready.append(slot)
                continue
            why = ""
            if time.monotonic() > slot.deadline:
                why = f"timeout while preparing (phase {slot.worker.phase()})"
            elif check_memory and _over_memory(proc.pid, limit):
                why = f"over the {self.config.memory_limit_gb:g} GB memory limit while preparing"
            if why:
                self.live.remove(slot)
                self._discard(slot)
                yield PoolResult(problem=slot.sp, failure=f"problem_error: {why}", spawned_at=slot.spawned_at)

    def _time(self, slot: _Slot) -> PoolResult:
        """Hand the token to `slot`: pause the others (unless told not to), time it, let them go on."""
        others = [s for s in self.live if s is not slot] if self.settings.pause_prep else []
        for s in others:
            _signal(s, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            _wait_stopped([s.worker.proc.pid for s in others if s.worker.proc is not None])
            if any(s.admitted for s in others) and self.config.device.startswith("cuda"):
                time.sleep(_SETTLE_S)
            assert slot.worker.proc is not None
            pin_process(slot.worker.proc.pid, self.timing_cores)
            timeout = self.config.timeout_s
            if self.stop_at is not None:
                timeout = max(1.0, min(timeout, self.stop_at - time.monotonic()))
            done = slot.worker.run(slot.req, timeout, self.config.memory_limit_gb)
        finally:
            self.live.remove(slot)
            self._discard(slot)
            for s in others:
                _signal(s, signal.SIGCONT)
                s.deadline += time.monotonic() - t0
        if done.timed_out and self._out_of_time():
            return PoolResult(problem=slot.sp, pending=True, spawned_at=slot.spawned_at)
        return PoolResult(problem=slot.sp, exit=done, spawned_at=slot.spawned_at)

    @staticmethod
    def _discard(slot: _Slot) -> None:
        slot.worker.kill()
        shutil.rmtree(slot.worker.scratch, ignore_errors=True)


def _signal(slot: _Slot, sig: signal.Signals) -> None:
    """A signal to the worker's whole process group (Inductor's compile workers included)."""
    proc = slot.worker.proc
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _wait_stopped(pgids: list[int], limit_s: float = 2.0) -> None:
    """Until every process of these groups has stopped (SIGSTOP lands asynchronously), at most `limit_s`."""
    from kevolve.sandbox.isolate.procfs import table

    groups, deadline = set(pgids), time.monotonic() + limit_s
    while groups and time.monotonic() < deadline:
        if all(p.state in "TtZX" for p in table().values() if p.pgid in groups):
            return
        time.sleep(0.002)
    if groups:
        log.warning("workers %s did not all stop within %.1f s of SIGSTOP", sorted(groups), limit_s)


__all__ = ["BaselinePool", "PoolResult", "PoolSettings", "admissible", "default_budget", "default_jobs"]
