"""Hack: reach the warm judge service (sandbox/parent/warm_service.py) from inside a runner, and drive it.

`kevolve eval` hands evaluations to a per-user service through a unix socket; a candidate that has read the
design knows where its folder is (the default places below, any folder on a service's command line in /proc),
and the test adds the exact paths of the service's socket and token to KNOWN (names a runner cannot list under
Landlock or see under bubblewrap: the strongest attacker is told them). From its runner it tries to read any token file there, to connect to
any socket there and send requests (status, stop) with each token it read and with a guessed one, and to find
the service's socket among its own descriptors. A token's bytes or any byte of an answer, and it fails to
construct ("reached the warm service"), so the verdict shows it; otherwise it computes ReLU honestly.
Expected: nothing is learned and its verdict stands: the token is outside every runner's view (Landlock reads,
bubblewrap's binds), the runner's seccomp filter refuses it a socket, and behind both the service refuses a peer
that descends from a kevolve judge before reading its request (it logs `refused a connection`;
tests/integration/test_warm_eval.py tests that layer alone), so the service still serves with its count unchanged.
"""
import glob
import json
import os
import socket
import struct

import torch
import torch.nn as nn

PLACES = ["/run/user/*/kevolve-warm", os.path.expanduser("~/.local/state/kevolve/warm"),
          "/root/.local/state/kevolve/warm", "/home/*/.local/state/kevolve/warm"]
KNOWN: list[str] = []  # the test's service's socket and token paths


def _service_dirs() -> list[str]:
    """Folders named on a warm service's command line (argv: python -m MODULE DIR DIGEST …)."""
    dirs = []
    try:  # under Landlock a runner cannot list /proc (isolate/landlock.py PROC_SHARED): then it learns nothing here
        pids = os.listdir("/proc")
    except OSError:
        return dirs
    for d in pids:
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 3 and argv[2].endswith(b"warm_service"):
            dirs.append(argv[3].decode(errors="replace"))
    return dirs


def _ask(path: str, token: str, op: str) -> bytes:
    try:  # the runner's seccomp filter refuses socket() itself (isolate/seccomp.py): an attacker tries anyway
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return b""
    s.settimeout(3.0)
    try:
        s.connect(path)
        body = json.dumps({"token": token, "op": op}).encode()
        s.sendall(struct.pack(">I", len(body)) + body)
        return s.recv(4096)
    except OSError:
        return b""
    finally:
        s.close()


def _learned() -> list[str]:
    found, tokens = [], []
    folders = {d for pattern in PLACES for d in glob.glob(pattern)} | set(_service_dirs())
    listed = [p for d in folders for p in glob.glob(os.path.join(d, "*"))]
    for tok in {p for p in KNOWN + listed if p.endswith(".token")}:
        try:
            with open(tok) as f:
                tokens.append(f.read().strip())
            found.append(f"token {tok}")
        except OSError:
            pass
    for sock in {p for p in KNOWN + listed if p.endswith(".sock")}:
        for token in tokens + ["0" * 64]:
            for op in ("status", "stop"):
                if _ask(sock, token, op):
                    found.append(f"an answer from {sock} to {op}")
    for fd in os.listdir("/proc/self/fd"):
        try:
            s = socket.fromfd(int(fd), socket.AF_UNIX, socket.SOCK_STREAM)
        except (OSError, ValueError):
            continue
        try:
            if str(s.getsockname()).endswith(".sock"):
                found.append(f"the service's socket as descriptor {fd}")
        except OSError:
            pass
        finally:
            s.close()
    return found


LEARNED = _learned()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        if LEARNED:
            raise RuntimeError(f"reached the warm service: {'; '.join(LEARNED)[:300]}")

    def forward(self, x):
        return torch.relu(x)
