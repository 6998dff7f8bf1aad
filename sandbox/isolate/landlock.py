"""Writes confined to a runner's own scratch directory, without bubblewrap: Linux's Landlock.

With isolation `none` a candidate runs as the user and could write anything the user can: the shared
build cache a later candidate imports (the red team's planted module, 2026-11-26: an honest 0.18x
candidate read 194.6x), the runner bytecode every runner reads, the Python installation. Landlock
(Linux 5.13+, no privileges, no namespaces) lets a process take write access away from itself and
everything it starts, for good. A candidate's runner does so once its job has arrived and before the
candidate's code is loaded: from then on it may create, change, rename or remove files only under its
scratch directory (its HOME, TMPDIR, private build directory and caches) and /dev/shm, and write to
device nodes that already exist (/dev/null, the GPU's). Reading is untouched. Landlock also keeps a
confined process from tracing (or opening the descriptors and memory of) any process outside its
domain, and from ABI 6 on from signalling one or reaching its abstract unix sockets: the judge, the
reference's runner and the user's other processes are out of reach.

Where the kernel has no Landlock (or it is switched off) the runner says so in its `ready` answer and
`kevolve doctor` names it; nothing else changes.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Sequence
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same numbers on x86_64 and arm64
_VERSION = 1  # landlock_create_ruleset flag: ask the ABI version
_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3


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


def confine_writes(writable: Sequence[Path], devices: Sequence[Path] = (Path("/dev"),)) -> str:
    """Take every file-system write away from this process and its descendants except under
    `writable` (any write) and `devices` (writing to files that exist there: /dev/null, the GPU's
    nodes). "" when confined, else why not (the caller reports it; nothing was changed then)."""
    version = abi()
    if version <= 0:
        return "Landlock is not available in this kernel"
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    rights = _writes(version)
    # ABI 6+: no signal to a process outside this one's domain (the judge, the reference's runner, the
    # user's other processes: SIGSTOP stalled them, 2026-11-26) and no abstract unix socket outside it
    attr = _RulesetAttrScoped(rights, 0, SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX) if version >= 6 else _RulesetAttr(rights)
    fd = int(libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                          ctypes.c_uint32(0)))
    if fd < 0:
        return f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
    try:
        rules = [(p, rights) for p in writable] + [(p, WRITE_FILE | (rights & TRUNCATE)) for p in devices]
        for path, allowed in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine (no /dev/shm): nothing to allow there
            try:
                rule = _PathBeneath(allowed, pfd)
                if libc.syscall(_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_PATH_BENEATH), ctypes.byref(rule),
                                ctypes.c_uint32(0)) != 0:
                    return f"landlock_add_rule({path}): {os.strerror(ctypes.get_errno())}"
            finally:
                os.close(pfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}"
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            return f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}"
        return ""
    finally:
        os.close(fd)
