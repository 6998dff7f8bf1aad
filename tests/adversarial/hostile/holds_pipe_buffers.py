"""Hostile: hold memory in pipe buffers (red team 8): kernel memory in no file, no folder and no process's RSS, so
neither the scratch watch nor the memory watch sees it. 512 pipes, each asked for 1 MB and filled: 512 MB held if
the runner may pass the user's pipe-buffer limit (root with CAP_SYS_ADMIN or CAP_SYS_RESOURCE: it held 900 MB under
`none`), else about 64 MB (pipe-user-pages-soft). It returns wrong results if it held more than 200 MB.

Expected: ok (the runner gave those capabilities up before the candidate loaded: procfs.drop_ptrace).
"""
import fcntl
import os

import torch
import torch.nn as nn

F_SETPIPE_SZ = 1031
HELD: list[int] = []


def _hold() -> int:
    held = 0
    for _ in range(512):
        try:
            r, w = os.pipe()
        except OSError:
            break
        HELD.extend((r, w))
        try:
            size = fcntl.fcntl(w, F_SETPIPE_SZ, 2**20)
        except OSError:
            size = 4096
        os.set_blocking(w, False)
        try:
            held += os.write(w, b"\1" * size)
        except OSError:
            pass
    return held


HELD_BYTES = _hold()


class ModelNew(nn.Module):
    def forward(self, x):
        if HELD_BYTES > 200 * 2**20:
            return x.clone()  # a visible signal: it held more than the user's limit allows
        return torch.relu(x)
