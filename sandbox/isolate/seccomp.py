"""A candidate's runner without the kernel interfaces no kernel needs: a seccomp filter it installs on itself.

Landlock (landlock.py) confines paths; a file-system rule cannot see what the fourth red team (2026-11-27) used
under isolation `none`, where the runner shares the host's namespaces and runs as the user (often root):

- **sockets**: a pathname unix socket is reached by connect(), not by an open (the Docker engine's socket started a
  container with the host's / mounted and read the secrets; PostgreSQL's and containerd's were as close), and
  without a network namespace 127.0.0.1 is the host's;
- **clone3**: `CLONE_INTO_CGROUP` starts a helper in another cgroup (the root's), out of the runner's cgroup, so
  out of its CPU clock, its freeze, `background_cpu` and `cgroup.kill`: it did the work off the clock (an unearned
  2x `ok`) and outlived the evaluation;
- **System V IPC**: segments outlive the evaluation and are a channel to the next one;
- and what root may do to the whole machine or to the clocks the judge reads: kernel modules, kexec, mounts,
  namespaces, keys, BPF, perf events, io_uring (its own socket and file operations), adjtimex / clock_settime
  (a slewed clock times everything wrong), other processes' memory and descriptors, and a raised or real-time
  priority (root may renice itself to -20 or take SCHED_FIFO and starve a neighbouring evaluation's timed calls:
  found by a probe of this filter, 2026-11-27).

Each is refused with EPERM (clone3 with ENOSYS, so the C library falls back to clone(), which cannot name a
cgroup). socketpair() stays: an unnamed connected pair reaches no one. The filter is installed once, before the
candidate's code is loaded, and holds for everything the runner starts (its compiler included). It is not a
replacement for the sandbox: under bubblewrap the same filter is one more layer.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32_BIT = 0x40000000

# (audit arch, syscall numbers by name) per machine; names missing on one are simply not there
_ARCH = {
    "x86_64": (0xC000003E, {
        "socket": 41, "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66,
        "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semtimedop": 220, "clone3": 435,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "init_module": 175,
        "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "mount": 165,
        "umount2": 166, "pivot_root": 155, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsmount": 432,
        "unshare": 272, "setns": 308, "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321,
        "perf_event_open": 298, "adjtimex": 159, "clock_adjtime": 305, "clock_settime": 227, "settimeofday": 164,
        "process_vm_readv": 310, "process_vm_writev": 311, "open_by_handle_at": 304, "iopl": 172, "ioperm": 173,
        "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "userfaultfd": 323, "pidfd_getfd": 438,
        "setpriority": 141, "sched_setscheduler": 144, "sched_setattr": 314, "ioprio_set": 251, "kcmp": 312,
        "process_madvise": 440, "ptrace": 101}, {
        "prlimit64": 302, "sched_setaffinity": 203, "sched_setparam": 142, "migrate_pages": 256, "move_pages": 279}),
    "aarch64": (0xC00000B7, {
        "socket": 198, "shmget": 194, "shmat": 196, "shmctl": 195, "semget": 190, "semop": 193, "semctl": 191,
        "msgget": 186, "msgsnd": 189, "msgrcv": 188, "msgctl": 187, "semtimedop": 192, "clone3": 435,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "init_module": 105,
        "finit_module": 273, "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "mount": 40,
        "umount2": 39, "pivot_root": 41, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsmount": 432,
        "unshare": 97, "setns": 268, "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280,
        "perf_event_open": 241, "adjtimex": 171, "clock_adjtime": 266, "clock_settime": 112, "settimeofday": 170,
        "process_vm_readv": 270, "process_vm_writev": 271, "open_by_handle_at": 265, "reboot": 142,
        "swapon": 224, "swapoff": 225, "acct": 89, "userfaultfd": 282, "pidfd_getfd": 438, "setpriority": 140,
        "sched_setscheduler": 119, "sched_setattr": 274, "ioprio_set": 30, "kcmp": 272, "process_madvise": 440,
        "ptrace": 117}, {
        "prlimit64": 261, "sched_setaffinity": 122, "sched_setparam": 118, "migrate_pages": 238, "move_pages": 239}),
}
DENIED = tuple(sorted(_ARCH["x86_64"][1]))
"""The refused system calls (by name; each machine's numbers in _ARCH)."""
OWN_ONLY = tuple(sorted(_ARCH["x86_64"][2]))
"""Calls refused when their first argument names another process than the caller (a pid other than 0): another
process's resource limits, CPU set, priority or pages. Red team 6 (2026-11-28), isolation `none`: a candidate's
native code lowered the judge's open-file limit to 12, and a warm judge answered infra_error to every later
evaluation; the same call reaches the spare runners and the reference's. A process's calls on itself pass 0
(setrlimit, os.sched_setaffinity(0, …)); a thread binding itself by its thread id (pthread_setaffinity_np) is refused
too: an OpenMP binding then goes without."""


def supported() -> bool:
    return platform.system() == "Linux" and platform.machine() in _ARCH


def _stmt(code: int, k: int) -> bytes:
    return struct.pack("HBBI", code, 0, 0, k)


def _jump(code: int, k: int, jt: int, jf: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes:
    """The classic-BPF filter: the wrong architecture (or x86-64's x32 calls) refused, each DENIED call refused
    (clone3 as not implemented), everything else allowed."""
    arch, numbers, own_only = _ARCH[machine or platform.machine()]
    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06
    perm, nosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    denied = sorted(numbers.items(), key=lambda kv: kv[1])
    out = [_stmt(ld_w_abs, 4), _jump(jeq_k, arch, 1, 0), _stmt(ret_k, perm), _stmt(ld_w_abs, 0)]
    if arch == _ARCH["x86_64"][0]:
        out += [_jump(jge_k, _X32_BIT, 0, 1), _stmt(ret_k, perm)]
    # per own-only call: "not it -> on; its first argument's low word (pid_t) 0 -> on; else refused", the number
    # loaded again after (seccomp_data: nr at 0, arch at 4, ip at 8, args from 16, little-endian)
    for _name, nr in sorted(own_only.items(), key=lambda kv: kv[1]):
        out += [_jump(jeq_k, nr, 0, 3), _stmt(ld_w_abs, 16), _jump(jeq_k, 0, 1, 0), _stmt(ret_k, perm),
                _stmt(ld_w_abs, 0)]
    # per denied call: "jeq nr -> its return", laid out as jeq + ret pairs
    for name, nr in denied:
        out += [_jump(jeq_k, nr, 0, 1), _stmt(ret_k, nosys if name == "clone3" else perm)]
    out.append(_stmt(ret_k, _RET_ALLOW))
    return b"".join(out)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> str:
    """Install the filter on this process (and everything it starts, for good): "" when in force, else why not."""
    if not supported():
        return f"seccomp filters are not written for {platform.system()} {platform.machine()}"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}"
    code = program()
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"prctl(PR_SET_SECCOMP): {os.strerror(ctypes.get_errno())}"
    return ""


__all__ = ["DENIED", "OWN_ONLY", "install", "program", "supported"]
