"""Child subreaper: a worker's orphans come back to this process, which kills them.

Without cgroups, a process that calls setsid() and then loses its parent is re-parented to init,
out of reach of the process-group kill: the incident of a double-forked daemon outliving its
evaluation. With PR_SET_CHILD_SUBREAPER set on this process, such orphans are re-parented here
instead, so every descendant of a worker stays in this process's subtree until it is killed.

This process may have other children, though: other lanes' workers, warm spares, the compile
pool, a database server a test started, whose own orphans come here too. A worker's descendants
are told apart by a tag the kernel carries for them: each worker's hard RLIMIT_LOCKS is set to a
value of its own, below this process's. Every descendant inherits it, across fork and exec, in
any session or process group, whatever its environment; without CAP_SYS_RESOURCE it can lower
the value but never raise it back to this process's (which is why a root worker is started
without that capability). Linux has not enforced RLIMIT_LOCKS since 2.4.25, so the tag changes
nothing else. A child of this process whose limit is below this process's, and is not the tag of
a worker still running, descends from a finished worker: it and everything under it are killed.
Backed up by the session: a child whose session is a finished worker's (sid = the worker's pid,
which cannot be reused while the session has members) is one of its descendants too.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import logging
import os
import resource
import shutil
import signal
import threading
import time

from kevolve.sandbox.isolate import procfs

log = logging.getLogger(__name__)

_PR_SET_CHILD_SUBREAPER = 36
_RLIMIT_LOCKS = getattr(resource, "RLIMIT_LOCKS", 10)
_LOCK = threading.Lock()
_LIVE: dict[int, int] = {}  # tag -> pid of a worker still running
_SEQ = itertools.count(1)


@functools.cache
def enable() -> str:
    """Make this process a child subreaper (once); '' when it is one, else why not."""
    ceiling = procfs.locks_hard_limit(os.getpid())
    if ceiling is None or ceiling < 2**20:
        return f"RLIMIT_LOCKS of this process is {ceiling}: no room below it for worker tags"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}"
    except (OSError, AttributeError) as e:
        return f"prctl unavailable: {e}"
    return ""


@functools.cache
def _ceiling() -> int:
    """This process's hard RLIMIT_LOCKS: what its own children inherit."""
    return procfs.locks_hard_limit(os.getpid()) or 0


def _new_tag() -> int:
    return min(_ceiling(), 2**62) - next(_SEQ)


class Subreaper:
    """Containment of one worker by this process's subreaping and the worker's tag."""

    kind = "subreaper"

    def __init__(self) -> None:
        self.tag = _new_tag()
        self.worker: procfs.ProcStat | None = None
        with _LOCK:  # live before anything carries it: another worker's sweep must spare it
            _LIVE[self.tag] = 0

    def wrap(self, argv: list[str]) -> list[str]:
        """Tag the worker's first process before it runs anything (prlimit, else in started())."""
        if shutil.which("prlimit") is None:
            return argv
        return ["prlimit", f"--locks={self.tag}:{self.tag}", "--", *argv]

    def started(self, pid: int) -> None:
        """Register the running worker (its tag is no orphan's while it runs)."""
        with _LOCK:
            _LIVE[self.tag] = pid
        try:
            resource.prlimit(pid, _RLIMIT_LOCKS, (self.tag, self.tag))
        except (OSError, ValueError) as e:  # gone already, or lowered further by the worker itself
            log.debug("tagging worker %d: %s", pid, e)
        self.worker = procfs.read_stat(pid)

    def kill_all(self) -> None:
        """The worker is over: kill every escaped descendant of it (and of any finished worker)."""
        with _LOCK:
            _LIVE.pop(self.tag, None)
        sweep(self.worker)

    def cpu_seconds(self) -> float | None:
        return None  # the tag finds orphans to kill, not a complete account: the caller sums the group


def forget() -> None:
    """In a forked child: the parent's workers are not its own, and its limit is its own."""
    with _LOCK:
        _LIVE.clear()
    _ceiling.cache_clear()


def _escaped(p: procfs.ProcStat, live: dict[int, int], finished: procfs.ProcStat | None) -> bool:
    """Whether a child of this process descends from a finished worker (never the worker itself:
    its Popen reaps it, and a reap here would steal its exit status)."""
    if p.pid in live.values() or (finished is not None and (p.pid, p.start) == (finished.pid, finished.start)):
        return False
    if finished is not None and p.sid == finished.pid and p.start >= finished.start:
        return True
    tag = procfs.locks_hard_limit(p.pid)
    return tag is not None and tag < _ceiling() and tag not in live


def sweep(finished: procfs.ProcStat | None = None, limit_s: float = 10.0) -> int:
    """Kill every escaped descendant of finished workers among this process's children; how many.

    No freezer without cgroups, so: stop each one found (a stopped process cannot fork), kill it,
    reap the dead, and look again, until none is left.
    """
    me, killed = os.getpid(), 0
    deadline = time.monotonic() + limit_s
    while True:
        with _LOCK:
            live = dict(_LIVE)
        procs = procfs.table()
        victims = [p for p in procfs.children(me, procs) if _escaped(p, live, finished)]
        if not victims:
            return killed
        tree = [p for p in procfs.subtree(victims, procs) if p.state != "Z"]
        for p in tree:
            procfs.signal_exact(p, signal.SIGSTOP)
        killed += sum(procfs.signal_exact(p, signal.SIGKILL) for p in tree)
        for p in victims:
            procfs.reap(p.pid)
        if time.monotonic() > deadline:
            log.warning("escaped worker processes still alive after %.0f s: %s", limit_s,
                        [p.pid for p in victims])
            return killed
        time.sleep(0.002)


__all__ = ["Subreaper", "enable", "sweep"]
