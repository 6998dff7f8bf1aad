"""The judge's handle on one runner process: start it warm, hand it a job, talk to it with deadlines.

A runner is untrusted and may die, hang, spin, blow its memory or disk limit, or write garbage
into its channel at any moment. Every way it can stop answering comes back as a `Gone` record,
never as an exception and never as a hang of the judge.
"""

from __future__ import annotations

import logging
import os
import signal
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kevolve.sandbox.common.channel import Channel, ChannelClosed, Garbled
from kevolve.sandbox.isolate.launch import WorkerProcess, _group_stats, _over_memory, _rss_bytes, _tail, over_scratch
from kevolve.sandbox.isolate.memory import gib, oom_killed, oom_kills, oom_reason

if TYPE_CHECKING:
    from kevolve.sandbox.config import SandboxConfig

log = logging.getLogger(__name__)
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Gone:
    """A runner that ended (or was ended) without answering, as seen from outside."""

    returncode: int | None
    timed_out: bool = False
    memory_exceeded: bool = False
    disk_exceeded: bool = False
    garbled: str = ""
    log_tail: str = ""
    memory_note: str = ""  # with memory_exceeded: what it reached, and who ended it (kevolve or the kernel)


class RunnerProcess(WorkerProcess):
    """A runner: `start()` spawns it warm; `request()` sends one message and waits for the answer."""

    module = "kevolve.sandbox.runner.serve"

    def start(self) -> RunnerProcess:
        # Two anonymous pipes the runner inherits: no name in the scratch directory that another
        # process of the user (a candidate, without bubblewrap) could open and write answers into
        # (a container's runner, which cannot inherit them, uses FIFOs in its own bind mount)
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        try:
            self.spawn([sys.executable, "-m", self.module, self.device, f"--fds={cmd_r},{res_w}"],
                       pass_fds=(cmd_r, res_w))
        except BaseException:
            for fd in (res_r, cmd_w):
                os.close(fd)
            raise
        finally:
            os.close(cmd_r)
            os.close(res_w)
        self.ch = Channel(res_r, cmd_w)
        self._over_memory = threading.Event()
        self._over_disk = threading.Event()
        self._stop_watch = threading.Event()
        self.warm = False
        self._peak, self._limit_gb, self._oom_before = 0, 0.0, oom_kills()
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_warm(self, limit_s: float) -> Gone | None:
        """Block until the runner says it is warm (torch imported, device ready); Gone if it died."""
        if self.warm:
            return None
        msg = self.receive(time.monotonic() + limit_s)
        if isinstance(msg, Gone):
            return msg
        self.warm = msg.get("op") == "warm"
        return None if self.warm else self.gone(garbled=f"unexpected first message {str(msg)[:80]}")

    def watch(self, memory_limit_gb: float) -> None:
        """Poll the process group's memory and the scratch dir's size until the runner is killed."""
        limit = int(memory_limit_gb * 2**30)
        assert self.proc is not None
        pgid = self.proc.pid
        self._limit_gb, self._oom_before = memory_limit_gb, oom_kills()

        def run() -> None:
            tick = 0
            while not self._stop_watch.wait(0.1):
                rss = _rss_bytes(pgid)
                self._peak = max(self._peak, rss)
                if rss > limit and _over_memory(pgid, limit):
                    self._over_memory.set()
                    self.kill()
                    return
                tick += 1
                if self.scratch_limit and tick % 3 == 0 and over_scratch(self.scratch, pgid, self.scratch_limit):
                    self._over_disk.set()
                    self.kill()
                    return

        threading.Thread(target=run, daemon=True, name=f"watch-{pgid}").start()

    def request(self, msg: dict[str, Any], deadline: float) -> dict[str, Any] | Gone:
        self.freeze(False)
        try:
            self.ch.send(msg, alive=self.alive)
        except ChannelClosed:
            return self._closed()
        return self.receive(deadline)

    @property
    def freezes(self) -> bool:
        """Frozen whole, a setsid daemon too (its cgroup), since the last freeze: then the judge copies draws in
        outside its window. The process-group stop holds nothing that left the group, so not then."""
        return getattr(self, "_whole", False)

    def freeze(self, on: bool) -> None:
        """Freeze the runner and everything it started between the judge's commands (its cgroup; else
        SIGSTOP/SIGCONT of its process group), so that no thread of the candidate's works while the
        reference runs, outputs are compared or the next draws are copied in. Thawed by `request`/`send`."""
        if self.proc is None or self.proc.poll() is not None or on == getattr(self, "_frozen", False):
            return
        self._frozen = on
        freeze = getattr(self.containment, "freeze", None)
        if freeze is not None and freeze(on):
            self._whole = True
            return
        self._whole = False
        try:
            os.killpg(self.proc.pid, signal.SIGSTOP if on else signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            pass

    def send(self, msg: dict[str, Any]) -> None:
        """A command that needs no answer of its own (a batch's go-ahead to vet); a closed channel shows
        at the next `receive`."""
        self.freeze(False)
        try:
            self.ch.send(msg, alive=self.alive)
        except ChannelClosed:
            pass

    def _closed(self, wait_s: float = 2.0) -> Gone:
        """The runner's end of its pipes closed: it is exiting; let it finish (its own exit code, not
        the SIGKILL `gone` would send a process still on its way out) for up to `wait_s`."""
        if self.proc is not None:
            try:
                self.proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:  # still running: `gone` kills it
                pass
        return self.gone()

    def receive(self, deadline: float) -> dict[str, Any] | Gone:
        """The runner's next message, or how it ended: timeout (killed), death, limits, garbage."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return self.gone(timed_out=True)
            try:
                msg = self.ch.recv(min(left, 0.2))
            except Garbled as e:
                return self.gone(garbled=str(e))
            except ChannelClosed:
                return self._closed()
            if msg is not None:
                return msg
            if self._over_memory.is_set() or self._over_disk.is_set() or not self.alive():
                return self.gone()

    def gone(self, timed_out: bool = False, garbled: str = "") -> Gone:
        self.kill()
        code = self.proc.returncode if self.proc is not None else None
        if self.launcher is not None and self.launcher.shell_exit_codes and code is not None and code > 128:
            code = 128 - code
        tail = _tail(self.scratch / "worker.log")
        over, note = self._over_memory.is_set(), ""
        if over:
            note = f"(kevolve ended it at {gib(self._peak)} resident)"
        elif not (timed_out or garbled or self._over_disk.is_set()) and oom_killed(code, self._oom_before):
            over = True  # the machine ran out before kevolve's own limit was reached
            note = f"(the kernel's out-of-memory killer ended it at {gib(self._peak)} resident or more)"
            tail += f"\nkevolve: {oom_reason('the runner', self._peak or None, self._limit_gb)}"
        return Gone(returncode=code, timed_out=timed_out, memory_exceeded=over, disk_exceeded=self._over_disk.is_set(),
                    garbled=garbled, log_tail=tail, memory_note=note)

    def precise_cpu_seconds(self) -> float | None:
        """The runner's CPU time by its cgroup (microseconds, every process ever in it), read call by
        call; None without one (the /proc fallback counts 10 ms ticks: too coarse for one call)."""
        if self.proc is None or self.containment is None:
            return None
        return self.containment.cpu_seconds()

    def cpu_seconds(self) -> float:
        """User + system CPU time of the runner so far: its cgroup's where it has one (every process
        ever in it, a setsid daemon too), else its process group's live processes (their threads,
        ended ones included) and the children they reaped."""
        if self.proc is None:
            return 0.0
        whole = self.containment.cpu_seconds() if self.containment is not None else None
        if whole is not None:
            return whole
        return sum(sum(int(x) for x in f[11:15]) for _pid, f in _group_stats(self.proc.pid)) / _TICK

    def kill(self) -> None:
        if hasattr(self, "_stop_watch"):
            self._stop_watch.set()
        super().kill()

    def close(self) -> None:
        """Kill the runner and close the channel (the scratch dir stays until `finish`)."""
        self.kill()
        if hasattr(self, "ch"):
            self.ch.close()

    def finish(self, candidate_source: str | None = None, keep_scratch: bool = False) -> None:
        """After the runner is gone: promote a candidate's builds into the cache, drop its scratch."""
        self.close()
        if candidate_source is not None and self.build_path and self.host_cache:
            from kevolve.sandbox.build.cache import build_scope, promote

            promote(self.scratch / "build", self.host_cache, build_scope(candidate_source))
        if not keep_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


__all__ = ["Gone", "RunnerProcess"]


_primed = False


def runner_key(config: SandboxConfig) -> str:
    """Spares started for one configuration serve another only if these agree (config.RUNNER_FIELDS)."""
    from kevolve.sandbox.config import RUNNER_FIELDS

    return config.model_dump_json(include=set(RUNNER_FIELDS))


def start_local(device: str, scratch_root: Path | None, spare_cores: set[int] | None,
                config: SandboxConfig) -> RunnerProcess:
    """A local runner (bubblewrap, or none) for `config`, starting now. Imports no torch: the judge's entry
    (judge/boot.py) starts its first runners with this before it imports torch itself."""
    global _primed
    from kevolve.sandbox.isolate import pycache
    from kevolve.sandbox.isolate.bwrap import local_launcher
    from kevolve.sandbox.isolate.containment import ContainmentKind
    from kevolve.sandbox.isolate.cores import pin_group

    if not _primed:  # once, before the first local runner: bytecode they read (pycache.py). A judge takes up its own
        # copy, in its own folder (its working directory, removed with it): what a runner without a sandbox writes is
        # then blamed on that judge's candidate alone, and reaches no other judge's runners, sandboxed or not
        _primed = True
        own = pycache.ROOT_VAR in os.environ  # a judge the parent started (local.py), not a test's own process
        pycache.prime(Path(os.environ.get(pycache.ROOT_VAR) or config.cache_dir), private=Path.cwd() if own else None)
    launcher = local_launcher(config)
    kind = ContainmentKind(config.containment) if config.containment else None
    r = RunnerProcess(device, scratch_root, launcher=launcher, scratch_limit_gb=config.scratch_limit_gb,
                      containment=kind).start()
    if spare_cores and r.proc is not None:
        pin_group(r.proc.pid, spare_cores)  # warm up where nothing is being timed
    return r
