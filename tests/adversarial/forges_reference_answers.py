"""Hack: answers written into the reference runner's channel (my own attack on the judge's trusted
runner, 2026-11-25: the first item still open in docs/VERIFICATION.md's held-out list).

Without bubblewrap a candidate runs as the user, beside the reference's runner. At import it looks for
that runner by name (the channel's FIFO `res` in the working folder of a runner of its judge that holds
input files) and through /proc (a runner of its own judge that has mapped input files, and its inherited descriptors,
`--fds=R,W` on its command line), and writes 64 answers claiming 50 ms a call into whatever it can open. Read
as the reference's times, they make torch.relu thousands of times faster than eager.
Expected: an honest speed: nothing can be opened (bubblewrap; no FIFO names any more; a runner that is not
dumpable, closed to root too since runners give up CAP_SYS_PTRACE). Where an answer were written it would be
rejected: tampering, since it does not echo the call's nonce.
"""
import json
import os
import stat
import struct
from pathlib import Path

import torch
import torch.nn as nn


def _frame() -> bytes:
    data = json.dumps({"ok": True, "ms": 50.0, "wall_ms": 50.0, "host_ms": 0.01, "covered": True}).encode()
    return struct.pack(">I", len(data)) + data


def _judges_family() -> set[int]:
    """The judge (this runner's parent) and every process below it: the reference's runner among them (under
    bubblewrap, a grandchild). Only these: a kevolve evaluating beside this one (another test session, pytest -n)
    is not this candidate's judge."""
    parent = {}
    try:
        listed = os.listdir("/proc")
    except OSError:  # Landlock keeps a runner to /proc's machine-wide files and its own /proc/PID
        listed = [str(os.getppid())]
    for d in listed:
        try:
            with open(f"/proc/{d}/stat") as f:
                parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    family, grew = {os.getppid()}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in family} - family
        family |= more
        grew = bool(more)
    return family


def _targets() -> list[str]:
    me, found, family = Path.cwd().resolve(), [], _judges_family()
    for pid in family:  # a runner of its judge whose scratch (its working folder) holds a FIFO channel
        try:
            d = Path(os.readlink(f"/proc/{pid}/cwd"))
            if d != me and d.name.startswith("kevolve-") and stat.S_ISFIFO(os.stat(d / "res").st_mode) \
                    and any(d.glob("shm-*")):
                found.append(str(d / "res"))
        except OSError:
            pass
    for pid in map(str, family):
        if int(pid) == os.getpid():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"kevolve.sandbox.runner.serve" not in argv or "/shm-" not in Path(f"/proc/{pid}/maps").read_text():
                continue
        except OSError:
            continue
        for a in argv:
            if a.startswith(b"--fds="):
                found.append(f"/proc/{pid}/fd/{a.split(b',')[1].decode()}")
    return found


for path in _targets():
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        for _ in range(64):
            os.write(fd, _frame())
        os.close(fd)
    except OSError:
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
