"""The Linux process table as typed records, and signals that cannot hit a recycled pid.

A pid alone does not name a process for long (pid_max is often 32768); a pid with its start time
does. Everything here that kills does so through a pidfd opened after checking that start time.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

_INFINITY = 2**64 - 1


@dataclass(frozen=True)
class ProcStat:
    """One process as /proc/PID/stat shows it."""

    pid: int
    ppid: int
    pgid: int
    sid: int  # session id: inherited through fork; only setsid() leaves it, for a session of its own
    state: str  # 'R', 'S', 'Z' (zombie: dead, waiting to be reaped) …
    start: int  # clock ticks after boot; (pid, start) names one process for good


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat, or None when there is no such process (any more)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return ProcStat(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0], int(fields[19]))
    except (OSError, IndexError, ValueError):
        return None


def table() -> dict[int, ProcStat]:
    """Every process visible now, by pid."""
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (p := read_stat(int(name))) is not None:
            procs[p.pid] = p
    return procs


def children(pid: int, procs: dict[int, ProcStat]) -> list[ProcStat]:
    """The direct children of `pid` (threads' children included: a child's ppid is the process)."""
    return [p for p in procs.values() if p.ppid == pid]


def subtree(roots: list[ProcStat], procs: dict[int, ProcStat]) -> list[ProcStat]:
    """`roots` and all their descendants."""
    kids: dict[int, list[ProcStat]] = {}
    for p in procs.values():
        kids.setdefault(p.ppid, []).append(p)
    out, todo, seen = [], list(roots), set()
    while todo:
        p = todo.pop()
        if p.pid in seen:
            continue
        seen.add(p.pid)
        out.append(p)
        todo += kids.get(p.pid, [])
    return out


def locks_hard_limit(pid: int) -> int | None:
    """The hard RLIMIT_LOCKS of a process (/proc/PID/limits is readable by anyone), None if gone."""
    try:
        with open(f"/proc/{pid}/limits") as f:
            for line in f:
                if line.startswith("Max file locks"):
                    hard = line[len("Max file locks"):].split()[1]
                    return _INFINITY if hard == "unlimited" else int(hard)
    except (OSError, IndexError, ValueError):
        return None
    return None


def signal_exact(p: ProcStat, sig: int) -> bool:
    """Send `sig` to exactly the process `p` names (not a newer one with its pid); False if gone."""
    try:
        fd = os.pidfd_open(p.pid)
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):  # no pidfd (Linux < 5.3): a short race is the best there is
        now = read_stat(p.pid)
        if now is None or now.start != p.start:
            return False
        try:
            os.kill(p.pid, sig)
            return True
        except ProcessLookupError:
            return False
    try:
        now = read_stat(p.pid)  # the fd holds the process that had this pid when it was opened
        if now is None or now.start != p.start:
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)


def reap(pid: int) -> None:
    """Collect a dead child of this process (never waitpid(-1): that would steal other owners' exits)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def cmdline(pid: int) -> str:
    """The process's argv joined by spaces ('' when gone or a kernel thread)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


_PR_SET_DUMPABLE, _PR_GET_DUMPABLE = 4, 3


def set_dumpable(on: bool) -> bool:
    """prctl(PR_SET_DUMPABLE): off, the process's /proc files (fd/, mem, environ, maps) belong to root
    and ptrace refuses it, so another process of the same user (a candidate run without bubblewrap)
    can neither open its descriptors nor read or write its memory. Root is not stopped by this.
    Reset to on by every execve; False where prctl is not there (not Linux)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_DUMPABLE, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_CAP_SYS_PTRACE, _PR_CAPBSET_DROP, _CAP_VERSION_3 = 19, 24, 0x20080522
# given up by every runner: another process's memory (ptrace), and root's exemptions from the user's limits (pipe
# buffers past pipe-user-pages-soft: red team 8 held 900 MB of kernel memory in 1024 pipes under `none`, in no file
# and no RSS; the same pipes under bubblewrap, capabilities dropped, stopped at 64 MB)
_CAP_SYS_ADMIN, _CAP_SYS_RESOURCE = 21, 24
DROPPED = (_CAP_SYS_PTRACE, _CAP_SYS_ADMIN, _CAP_SYS_RESOURCE)


def drop_ptrace() -> bool:
    """Give up DROPPED for good (bounding, permitted, effective and inheritable sets): a runner that is root (as on
    many GPU machines) otherwise reads and writes any same-user process's memory whatever its dumpable flag, the
    judge's and the user's kevolve process's included, and passes the limits a user's processes are held to.
    Capabilities are a thread's: call it before any thread starts (threads made later inherit the calling thread's
    sets). True when none is held afterwards (a user other than root holds none to begin with); False where the
    calls are not there (not Linux)."""
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in DROPPED:
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # needs CAP_SETPCAP: without it, nothing to drop
        hdr, data = Header(_CAP_VERSION_3, 0), (Data * 2)()
        if libc.capget(ctypes.byref(hdr), data) != 0:
            return False
        bit = ~sum(1 << cap for cap in DROPPED) & 0xFFFFFFFF
        if data[0].permitted & ~bit:
            data[0].effective &= bit
            data[0].permitted &= bit
            data[0].inheritable &= bit
            if libc.capset(ctypes.byref(hdr), data) != 0:
                return False
        return True
    except (OSError, AttributeError):
        return False


def hide_environ(secret: Callable[[str], bool]) -> int:
    """Overwrite with 'x' the values of the `secret` variables in this process's first environment block, the memory
    /proc/PID/environ reads (between stat's env_start and env_end): a process of the same user that may still read
    that file (a root one, on a kernel that checks it less than mem: seen on 6.18) finds no key there. Each is set
    again first (os.putenv: a copy elsewhere), so that C code's getenv still reads the real value; Python's
    os.environ is untouched. How many were hidden (0 where /proc is not there)."""
    import ctypes

    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50 and 51 (the 3rd is [0])
    except (OSError, ValueError, IndexError):
        return 0
    if not 0 < start < end or end - start > 8 << 20:  # at most execve's limit on arguments and environment
        return 0
    raw, pos, hidden = ctypes.string_at(start, end - start), 0, 0
    for entry in raw.split(b"\0"):
        name, eq, value = entry.partition(b"=")
        key = name.decode(errors="replace")
        if eq and value.strip(b"x") and secret(key):
            if key in os.environ:
                os.putenv(key, os.environ[key])
            ctypes.memset(start + pos + len(name) + 1, ord("x"), len(value))
            hidden += 1
        pos += len(entry) + 1
    return hidden


def dumpable() -> bool | None:
    """This process's PR_GET_DUMPABLE (None where prctl is not there)."""
    import ctypes

    try:
        return bool(ctypes.CDLL(None, use_errno=True).prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0))
    except (OSError, AttributeError):
        return None


__all__ = ["ProcStat", "children", "cmdline", "drop_ptrace", "dumpable", "hide_environ", "locks_hard_limit",
           "read_stat", "reap", "set_dumpable", "signal_exact", "subtree", "table"]
