"""Whole-tree containment: everything a worker starts dies with it, with or without bubblewrap.

A process-group kill misses whatever leaves the group: a double-forked `setsid` daemon, `nohup`,
`Popen(start_new_session=True)`, a native fork() in an extension followed by setsid(). Such a
process kept spinning after its evaluation and slowed the next one's reference worker (an honest
kernel measured 0.50x instead of 1.76x). Each worker therefore gets a containment, the best this
machine offers:

1. `cgroup`: a cgroup v2 of its own, killed whole (sandbox/isolate/cgroups.py);
2. `subreaper`: this process adopts the worker's orphans and kills those of finished workers,
   told apart from its other children by a tag the kernel carries (sandbox/isolate/subreaper.py);
3. `process_group`: the worker's process group only (what a `setsid` escapes).

Under bubblewrap the worker also has a PID namespace of its own: when the namespace's first
process dies the kernel kills every process in it, so nothing escapes there in any case. Every
worker (outside bubblewrap, which has `--die-with-parent`) is also started with a parent-death
signal, so that it dies with the thread that started it even when this process is killed outright.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import signal
import time
import subprocess
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from kevolve.sandbox.isolate import cgroups, procfs, subreaper

log = logging.getLogger(__name__)


class ContainmentKind(StrEnum):
    """How a worker's descendants are found and killed, best first."""

    CGROUP = "cgroup"  # a cgroup v2 per worker: every descendant, atomically (cgroup.kill)
    SUBREAPER = "subreaper"  # orphans re-parented to this process, identified by their tag
    PROCESS_GROUP = "process_group"  # the worker's process group: a setsid() escapes it


class Containment(Protocol):
    """The containment of one worker (or one throwaway child such as a prebuild)."""

    kind: str

    def wrap(self, argv: list[str]) -> list[str]:
        """The argv to spawn instead of `argv`: it joins the containment, then execs `argv`."""
        ...

    def started(self, pid: int) -> None:
        """Called with the spawned process's pid, before it is given anything to run."""
        ...

    def kill_all(self) -> None:
        """Kill everything the process started that is still alive (idempotent; after it ended)."""
        ...

    def cpu_seconds(self) -> float | None:
        """CPU time of everything in the containment so far, escaped processes and ended ones
        included; None where it cannot tell (the caller sums the worker's process group)."""
        ...


@dataclass(frozen=True)
class ContainmentChoice:
    """Which containment workers get on this machine, and why not the better ones."""

    kind: ContainmentKind
    detail: str  # where (the cgroup directory) or how
    passed_over: tuple[tuple[ContainmentKind, str], ...] = ()  # better kinds, each with its reason


class ProcessGroup:
    """The fallback: kill what is left of the worker's process group."""

    kind = ContainmentKind.PROCESS_GROUP.value

    def __init__(self) -> None:
        self.leader: procfs.ProcStat | None = None

    def wrap(self, argv: list[str]) -> list[str]:
        return argv

    def started(self, pid: int) -> None:
        self.leader = procfs.read_stat(pid)

    def kill_all(self) -> None:
        """Members of the worker's group that outlived it (a forked child that did not setsid)."""
        lead = self.leader
        if lead is None:
            return
        now = procfs.read_stat(lead.pid)
        if now is not None and now.start != lead.start:
            return  # the pid, hence the group id, belongs to someone else now
        for p in procfs.table().values():
            if p.pgid == lead.pid and p.start >= lead.start and p.state != "Z":
                procfs.signal_exact(p, signal.SIGKILL)

    def cpu_seconds(self) -> float | None:
        return None


class CgroupContainment:
    """A cgroup of the worker's own: everything in it is killed at once, then it is removed."""

    kind = ContainmentKind.CGROUP.value

    def __init__(self, home: cgroups.CgroupHome, token: str, pids_limit: int | None) -> None:
        self.cgroup = cgroups.WorkerCgroup(home, token, pids_limit)
        self.done = False

    def wrap(self, argv: list[str]) -> list[str]:
        return [*self.cgroup.join_prefix(), *argv]

    def started(self, pid: int) -> None:
        pass  # the shell in front joined the cgroup before exec'ing anything

    def kill_all(self) -> None:
        if self.done:
            return
        # A process in uninterruptible sleep (a GPU driver call) can take seconds to die: what
        # outlives the wait is tried again at the next kill_all().
        self.done = self.cgroup.kill()
        if not self.done:
            log.warning("processes in %s outlived 10 s of SIGKILL; will try again", self.cgroup.v2)

    def freeze(self, on: bool) -> bool:
        """Freeze (or thaw) everything in the cgroup, a setsid daemon too; waits up to 0.1 s for the kernel
        to report it frozen. False where the cgroup cannot (then the caller stops the process group)."""
        try:
            (self.cgroup.v2 / "cgroup.freeze").write_text("1" if on else "0")
            if on:
                deadline = time.monotonic() + 0.1
                while "frozen 1" not in (self.cgroup.v2 / "cgroup.events").read_text():
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.0002)
            return True
        except OSError:
            return False

    def cpu_seconds(self) -> float | None:
        """cpu.stat's usage_usec: every process that was ever in the cgroup (a setsid daemon too)."""
        try:
            for line in (self.cgroup.v2 / "cpu.stat").read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError):
            pass
        return None


@functools.cache
def choose() -> ContainmentChoice:
    """The best containment this process can use (probed once)."""
    passed: list[tuple[ContainmentKind, str]] = []
    home = cgroups.home()
    if isinstance(home, cgroups.CgroupHome):
        limit = "process limit in cgroup v1 pids" if home.pids_v1 else ("pids.max" if home.pids_v2 else "")
        detail = str(home.path) + (f"; {limit}" if limit else f"; no process limit: {home.note}")
        return ContainmentChoice(ContainmentKind.CGROUP, detail)
    passed.append((ContainmentKind.CGROUP, home.reason))
    why = subreaper.enable()
    if not why:
        return ContainmentChoice(ContainmentKind.SUBREAPER, "orphans re-parented here, tagged by RLIMIT_LOCKS",
                                 tuple(passed))
    passed.append((ContainmentKind.SUBREAPER, why))
    return ContainmentChoice(ContainmentKind.PROCESS_GROUP, "a setsid() escapes it", tuple(passed))


def contain(token: str, kind: ContainmentKind | None = None, pids_limit: int | None = None) -> Containment:
    """A fresh containment for one worker: `kind`, or the best here; falls back (logged once) on failure.

    `token` names the worker's cgroup (its scratch folder's name: unique). `pids_limit` bounds its
    processes and threads where a cgroup can (a fork bomb then runs out of slots, not the machine).
    """
    return _ParentDeath(_make(token, kind or choose().kind, pids_limit))


def _make(token: str, kind: ContainmentKind, pids_limit: int | None) -> Containment:
    if kind is ContainmentKind.CGROUP:
        home = cgroups.home()
        if isinstance(home, cgroups.Unavailable):
            _fall_back(kind, home.reason)
        else:
            try:
                return CgroupContainment(home, token, pids_limit)
            except OSError as e:
                _fall_back(kind, f"creating a cgroup in {home.path}: {e.strerror or e}")
        kind = ContainmentKind.SUBREAPER
    if kind is ContainmentKind.SUBREAPER:
        why = subreaper.enable()
        if not why:
            return subreaper.Subreaper()
        _fall_back(kind, why)
    return ProcessGroup()


def _forget_in_child() -> None:
    """A forked child is not a subreaper, owns no cgroup or worker of its parent: probe afresh."""
    for cached in (choose, cgroups.home, subreaper.enable):
        cached.cache_clear()
    subreaper.forget()


os.register_at_fork(after_in_child=_forget_in_child)


@functools.cache
def _fall_back(kind: ContainmentKind, why: str) -> None:
    log.warning("worker containment %s unavailable (%s); falling back to the next one", kind.value, why)


class _ParentDeath:
    """Another containment, with the child started under a parent-death signal (setpriv).

    The signal comes when the *thread* that spawned the child ends, or this whole process dies
    (SIGKILL, OOM) without running any clean-up: then at least the worker itself goes.
    """

    def __init__(self, inner: Containment) -> None:
        self.inner = inner
        self.kind = inner.kind

    def wrap(self, argv: list[str]) -> list[str]:
        return [*_setpriv_prefix(), *self.inner.wrap(argv)]

    def started(self, pid: int) -> None:
        self.inner.started(pid)

    def kill_all(self) -> None:
        self.inner.kill_all()

    def cpu_seconds(self) -> float | None:
        return self.inner.cpu_seconds()

    def freeze(self, on: bool) -> bool:
        inner = getattr(self.inner, "freeze", None)
        return bool(inner(on)) if inner is not None else False


@functools.cache
def _setpriv_prefix() -> tuple[str, ...]:
    """setpriv options that work here: a parent-death signal; for root, no CAP_SYS_RESOURCE.

    Without CAP_SYS_RESOURCE a root worker cannot raise the limit that tags it (sandbox/isolate/subreaper.py).
    """
    if shutil.which("setpriv") is None:
        return ()
    flags: list[str] = []
    wanted = [("--pdeathsig", "KILL")] + ([("--bounding-set", "-sys_resource")] if os.geteuid() == 0 else [])
    for flag in wanted:
        try:
            if subprocess.run(["setpriv", *flag, "--", "true"], capture_output=True, timeout=30).returncode == 0:
                flags += flag
        except (OSError, subprocess.TimeoutExpired):
            continue
    return ("setpriv", *flags, "--") if flags else ()


_NAMES = {ContainmentKind.CGROUP: "cgroup v2", ContainmentKind.SUBREAPER: "child subreaper",
          ContainmentKind.PROCESS_GROUP: "process group only"}


def doctor_rows() -> list[tuple[str, str]]:
    """Rows for `kevolve doctor`: the containment in use here, then why not each better one."""
    choice = choose()
    rows = [("containment", f"{_NAMES[choice.kind]} ({choice.detail})")]
    rows += [(f"containment: not {_NAMES[k]}", why) for k, why in choice.passed_over]
    return rows


__all__ = ["Containment", "ContainmentChoice", "ContainmentKind", "choose", "contain", "doctor_rows"]
