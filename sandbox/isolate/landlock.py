"""A runner's reads and writes confined to what it needs, without bubblewrap: Linux's Landlock.

With isolation `none` a candidate runs as the user and could read and write anything the user can: the shared
build cache a later candidate imports (the red team's planted module, 2026-11-26: an honest 0.18x candidate read
194.6x), the runner bytecode every runner reads, the Python installation, the user's files and keys, a concurrent
evaluation's input slots in /dev/shm (the second red team poisoned a neighbour's inputs there, and read secrets
through native code). Landlock (Linux 5.13+, no privileges, no namespaces) lets a process take file-system rights
away from itself and everything it starts, for good. A candidate's runner does so once its job has arrived and
before the candidate's code is loaded (and the build service's compilers do, where there is no bubblewrap):

- **writes** only under its scratch directory (its HOME, TMPDIR, private build directory, caches and shared
  buffers), and to those device nodes (/dev/null, the GPU's) — never /dev/shm, a disk or a terminal;
- **reads** only of what bubblewrap would bind (view.py: the toolchain and system folders, the loader's files in
  /etc, the Python installation and the worker's dependencies, kevolve's own packages), `/proc`, `/sys`, the
  device nodes, the build cache it loads from, the primed bytecode and its scratch: not /tmp, $HOME, /root,
  /dev/shm, the rest of /etc, other runners' scratch or the judge's.

Landlock also keeps a confined process from tracing (or opening the descriptors and memory of) any process outside
its domain, and from ABI 6 on from signalling one or reaching its abstract unix sockets: the judge, the
reference's runner and the user's other processes are out of reach. `python -m kevolve.sandbox.isolate.landlock
--write DIR [--read DIR …] -- COMMAND …` confines itself and then runs COMMAND (the build service's compilers).

Where the kernel has no Landlock (or it is switched off) the runner says so in its `ready` answer and
`kevolve doctor` names it; nothing else changes.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same numbers on x86_64 and arm64
_VERSION = 1  # landlock_create_ruleset flag: ask the ABI version
_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR, REMOVE_DIR, REMOVE_FILE = 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5
_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
READS = EXECUTE | READ_FILE | READ_DIR
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # what a rule on a file (not a folder) may hold
_DEV_ALLOWED = frozenset(("null", "zero", "full", "random", "urandom"))  # and nvidia*: see devices()


SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _RulesetAttrScoped(ctypes.Structure):  # ABI 6: the same, then network rights and scopes
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none or it is switched off."""
    if not hasattr(os, "uname") or os.uname().sysname != "Linux":
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    v = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    return max(int(v), 0)


def _writes(version: int) -> int:
    """Every right that changes the file system, as far as this ABI can take it away."""
    rights = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | _MAKE
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    return rights


def devices() -> list[Path]:
    """The device nodes a runner may open, as bubblewrap's minimal /dev holds them: null, zero, full, random, urandom,
    and the GPU's (nvidia*); never a block device (red team 3 opened the root file system's disk, /dev/vda, through a
    rule on every /dev entry: only the host's device cgroup stopped the read)."""
    try:
        entries = list(os.scandir("/dev"))
    except OSError:
        return []
    return sorted(Path(e.path) for e in entries
                  if (e.name in _DEV_ALLOWED or e.name.startswith("nvidia")) and not e.is_symlink()
                  and not stat.S_ISBLK(e.stat().st_mode))


# /proc's files of the whole machine, which hold no process's own data. Not /proc itself: with it a runner read any
# process of the user's /proc/PID/environ (the shell that ran `kevolve eval` still holds OPENAI_API_KEY in its first
# environment block), cmdline and maps, which this 6.18 kernel shows to a process of the same user even without
# CAP_SYS_PTRACE and inside a Landlock domain (red team 7, 2026-11-29). A process's own /proc/PID is added by
# `confine` itself: the rule names the confining process (its threads are under it; a child it starts is not).
PROC_SHARED = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/sys", "/proc/driver", "/proc/filesystems",
               "/proc/loadavg", "/proc/uptime", "/proc/version", "/proc/devices", "/proc/pressure", "/proc/vmstat",
               "/proc/zoneinfo", "/proc/swaps", "/proc/cgroups")


def runner_reads() -> list[Path]:
    """What a runner may read besides its scratch, the build cache and the primed bytecode: the view bubblewrap
    binds (view.py: the system folders, the loader's and getpwuid's files in /etc, the Python installation, the
    worker's dependencies, kevolve's own packages), /proc's machine-wide files (PROC_SHARED) and /sys."""
    from kevolve.sandbox.isolate import view

    return [Path(p) for p in (*view.SYSTEM, *view.ETC, *PROC_SHARED, "/sys", "/run/nvidia-persistenced",
                              *view.opt_dirs(), *view.python_dirs(), *view.site_dirs(), *view.source_dirs())]


def confine(writable: Sequence[Path], readable: Sequence[Path] | None = None) -> str:
    """Take file-system rights away from this process and its descendants: writes only under `writable` (and to
    device nodes that exist), reads only under `writable`, `readable` and the device nodes (everywhere where
    `readable` is None: writes alone are confined). "" when confined, else why not (the caller reports it;
    nothing was changed then)."""
    version = abi()
    if version <= 0:
        return "Landlock is not available in this kernel"
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    writes = _writes(version)
    rights = writes | (READS if readable is not None else 0)
    # ABI 6+: no signal to a process outside this one's domain (the judge, the reference's runner, the
    # user's other processes: SIGSTOP stalled them, 2026-11-26) and no abstract unix socket outside it
    attr = _RulesetAttrScoped(rights, 0, SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX) if version >= 6 else _RulesetAttr(rights)
    fd = int(libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                          ctypes.c_uint32(0)))
    if fd < 0:
        return f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
    reads = rights & READS
    rules = [(Path(p), rights) for p in writable]
    rules += [(p, reads | WRITE_FILE | (writes & TRUNCATE)) for p in devices()]
    if readable is not None:  # and its own /proc/PID (PROC_SHARED), by number: /proc/self names whoever looks
        rules += [(Path(p), reads) for p in (*readable, f"/proc/{os.getpid()}")]
    try:
        for path, allowed in rules:
            why = _add_rule(libc, fd, path, allowed)
            if why:
                return why
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}"
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            return f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}"
        return ""
    finally:
        os.close(fd)


def _add_rule(libc: ctypes.CDLL, fd: int, path: Path, allowed: int) -> str:
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return ""  # not on this machine (no /lib32): nothing to allow there
    try:
        mode = os.fstat(pfd).st_mode
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)):
            return ""  # a pipe or socket (no rule can name one): left out, so denied
        if not stat.S_ISDIR(mode):
            allowed &= _FILE_RIGHTS  # a rule on a file holds file rights only (EINVAL otherwise)
        if not allowed:
            return ""
        rule = _PathBeneath(allowed, pfd)
        if libc.syscall(_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_PATH_BENEATH), ctypes.byref(rule),
                        ctypes.c_uint32(0)) != 0:
            return f"landlock_add_rule({path}): {os.strerror(ctypes.get_errno())}"
        return ""
    finally:
        os.close(pfd)


def launcher(write: str | Path, read: Sequence[str | Path] = ()) -> list[str]:
    """The argv prefix that runs a command confined to writing under `write` and reading there, under `read` and
    what a runner reads (runner_reads, computed here in the caller): this file run as a plain script (`-I -S`: no
    site, no kevolve package), 20 ms where `-m kevolve.sandbox.isolate.landlock` took 0.2-0.5 s importing
    kevolve's records (the policy's preprocessor paid it per native source, 2026-11-27)."""
    reads = [*read, *_runner_reads()]
    return [sys.executable, "-I", "-S", __file__, "--write", str(write), *(a for r in reads for a in ("--read", str(r))),
            "--default-reads", "given", "--"]


@functools.cache
def _runner_reads() -> tuple[Path, ...]:
    return tuple(runner_reads())


def main(argv: Sequence[str]) -> None:
    """`--write DIR [--read DIR …] [--default-reads given] -- COMMAND …`: confine reads and writes, then run COMMAND
    in this process; `given`: the reads are all listed (launcher()), else a runner's are added here."""
    args = list(argv)
    cut = args.index("--")
    opts, command = args[:cut], args[cut + 1:]
    pairs = list(zip(opts[::2], opts[1::2]))
    write = [Path(v) for k, v in pairs if k == "--write"]
    read = [Path(v) for k, v in pairs if k == "--read"]
    if ("--default-reads", "given") not in pairs:
        read += runner_reads()
    why = confine(write, read)
    if why:
        sys.stderr.write(f"kevolve: not confined: {why}\n")
        sys.exit(126)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
