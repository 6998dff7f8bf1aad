"""Hostile: the kernel interfaces a file-system rule cannot see (the fourth red team, under isolation none).

Connects to a unix socket by its path (the Docker engine's, in the red team's run: a container with the host's /
mounted read the secrets), to the host's loopback, creates a System V shared-memory segment (it outlives the
evaluation: a channel to the next one), and starts a helper with clone3 (whose CLONE_INTO_CGROUP put the red team's
helper out of the runner's cgroup: off its CPU clock, its freeze and its kill). An honest ReLU unless one of them
works. Expected: ok, nothing reached, nothing left (the runner's seccomp filter refuses them all).
"""
import ctypes
import socket

import torch
import torch.nn as nn

UNIX_PATH = __UNIX_PATH__
PORT = __PORT__
SHM_KEY = __SHM_KEY__


def _reached() -> list[str]:
    got = []
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(UNIX_PATH)
            s.sendall(b"escaped")
            got.append("unix")
    except OSError:
        pass
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
            s.sendall(b"escaped")
            got.append("tcp")
    except OSError:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.shmget(ctypes.c_int(SHM_KEY), ctypes.c_size_t(4096), ctypes.c_int(0o1000 | 0o600)) >= 0:
        got.append("shm")
    libc.syscall.restype = ctypes.c_long
    # clone3 with a NULL argument: EFAULT where the call exists, ENOSYS (nothing started) where it is refused
    if libc.syscall(ctypes.c_long(435), None, ctypes.c_size_t(88)) != -1 or ctypes.get_errno() != 38:
        got.append("clone3")
    return got


class ModelNew(nn.Module):
    def forward(self, x):
        if _reached():
            return x.clone()
        return torch.relu(x)
