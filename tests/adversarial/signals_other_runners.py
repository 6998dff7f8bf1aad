"""Hack: signal the judge's other processes: the reference's runner, the judge itself.

Without a sandbox a candidate runs as the user and could SIGSTOP the reference's runner during its calls
(slower reference, larger speedup) or the judge. This one finds every kevolve process through /proc and
sends each of its own judge's (the judge, its runners) a harmless SIGCONT, the probe an attacker would make first; it reports reaching any by
failing to construct, and computes ReLU honestly otherwise.
Expected: no signal lands: Landlock's signal scope (ABI 6+) keeps a confined runner's signals inside
its own domain (isolation none, confine_writes auto on the CPU), and bubblewrap's PID namespace hides the
other processes; with confine_writes off and no sandbox it lands (runtime_error "signalled").
"""
import os
import signal

import torch
import torch.nn as nn


def _judges_family() -> set[int]:
    """The judge (this runner's parent) and every process below it: the reference's runner among them (under
    bubblewrap, a grandchild). Only these: a kevolve evaluating beside this one (another test session, pytest -n)
    is not this candidate's judge."""
    parent = {}
    try:  # a confined runner cannot list /proc (isolate/landlock.py): its parent is still the judge
        pids = os.listdir("/proc")
    except OSError:
        return {os.getppid()}
    for d in pids:
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


def _reach() -> int:
    reached = 0
    for d in map(str, _judges_family()):
        if int(d) in (1, os.getpid()):  # 1: bubblewrap's own init in its PID namespace
            continue
        try:
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if b"kevolve.sandbox" not in f.read():
                        continue
            except OSError:  # unreadable: signal the parent anyway (it is this runner's judge), skip the rest
                if int(d) != os.getppid():
                    continue
            os.kill(int(d), signal.SIGCONT)
            reached += 1
        except OSError:
            continue
    return reached


REACHED = _reach()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        if REACHED:
            raise RuntimeError(f"signalled {REACHED} of the judge's processes")

    def forward(self, x):
        return torch.relu(x)
