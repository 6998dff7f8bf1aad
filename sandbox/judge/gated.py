"""The judge's end of a timed batch's gate (common/gate.py): call k+1's values copied in only once call k's
outputs are the judge's own copy.

Both sides run it, the candidate's runner and the reference's, so both windows hold the same work: per call
after the first, one wait, a copy of the outputs, a copy of the next draw in, a sync of the judge's stream.

Off unless `KEVOLVE_GATE=on` (the judge's own environment, parent/local.py). Measured on the H200 (2026-11-29,
docs/BENCHMARKS.md): gated, red team 9's lookaheads were incorrect or gained nothing (a CuPy cumprod 3.3x its
honest twin ungated, 0.75x gated), but every call of both sides cost about 0.3 ms more (eager's ReLU 0.11 ->
0.42 ms a call), which pulls every small kernel's speed towards 1x; the draws made ahead of the command did not
change that. Likely cause, not yet measured apart: the judge's copies are GPU work of a second process, and the
GPU switches between the two processes' contexts twice a call. On the CPU the gate costs about 0.05 ms a call
of wall time and none of the runner's CPU time, which is what the CPU clock reads.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from kevolve.sandbox.common.gate import ABORT, DONE, GO, Words

GATE = os.environ.get("KEVOLVE_GATE", "").lower()


def enabled(is_cuda: bool) -> bool:
    """Gated batches for a runner on this device (GATE above: off unless asked for, on either device)."""
    del is_cuda  # the default may come to differ by device once the GPU's cost is cut (module docstring)
    return GATE in ("1", "on", "yes")


class Gate:
    """One runner's gate, its staging sets and its slots (slots.Slots)."""

    def __init__(self, scratch: Path, sets: Sequence[Sequence[Any]], slots: Any, device: torch.device) -> None:
        self.words = Words(scratch)
        self.sets, self.slots, self.device = sets, slots, device
        self._snaps: dict[int, list[torch.Tensor]] = {}  # the judge's copies of sets[k], made when first needed
        self._ready: dict[str, tuple[list[Any], tuple[int, ...]]] = {}  # `prepare`
        self._ev = torch.cuda.Event() if device.type == "cuda" else None

    @property
    def name(self) -> str:
        return self.words.name

    def hide(self) -> None:
        self.words.hide()

    def gates(self, keys: list[str]) -> bool:
        """A batch of these draws is gated: two calls or more, each on a draw of its own that no slot holds yet
        past the first (the never-seen draws a timed batch uses; a batch that rotates through seen draws has
        nothing left to hide)."""
        if len(keys) < 2 or len(set(keys)) != len(keys) or len(keys) > len(self.slots.slots):
            return False
        held = {s.holds for s in self.slots.slots}
        return not held & set(keys[1:])

    def snapshot(self, k: int) -> list[torch.Tensor]:
        """The judge's copy of staging set k as the runner left it when it said call k was done."""
        snap = self._snaps.get(k)
        if snap is None:
            snap = self._snaps[k] = [torch.empty_like(b.tensor) for b in self.sets[k]]
        for d, b in zip(snap, self.sets[k], strict=True):
            d.copy_(b.tensor)
        return snap

    def prepare(self, keys: list[str]) -> None:
        """Before the command (outside the judge's window): the values of calls 1.. made, on the device, and
        printed where their slot keeps a print, in the judge's own memory. Made between the calls they cost
        0.3 ms a call on both sides (the draws made again and their keyed prints, H200 2026-11-29)."""
        from kevolve.sandbox.judge.checks import keyed_print

        self._ready: dict[str, tuple[list[Any], tuple[int, ...]]] = {}
        slot = self.slots.slots[0]
        for key in keys[1:]:
            pristine = self.slots.pristine[key]
            values = [v.to(self.device) if isinstance(v, torch.Tensor) else v for v in pristine]
            kept = slot.needs_print(key in self.slots.lazy, pristine)
            tensors = [v for v, b in zip(values, slot.bufs, strict=True) if b is not None]
            self._ready[key] = (values, keyed_print(tensors) if kept else ())

    def between(self, keys: list[str], picks: list[int]) -> Callable[[int], None]:
        """What the judge does after call k says DONE: copy its outputs, copy call k+1's values in, sync."""
        def step(k: int) -> None:
            self.snapshot(k)
            if keys and not self.slots.slots[picks[k + 1]].put(keys[k + 1], *self._ready.pop(keys[k + 1])):
                raise ValueError(f"draw {keys[k + 1]} has other non-tensor inputs")
            if self.device.type == "cuda":  # spun on, not slept on: a plain sync woke 0.07-0.16 ms late (runner/step.py)
                self._ev.record(torch.cuda.current_stream(self.device))
                while not self._ev.query():
                    pass
        return step

    def staged(self, k: int, calls: int) -> list[torch.Tensor]:
        """What call k of a gated batch is judged on: the judge's copy, the last call's set as it stands (no
        value comes after it; the runner is frozen from its account until the comparison)."""
        return self._snaps[k] if k < calls - 1 else [b.tensor for b in self.sets[k]]

    def free(self) -> None:
        self._snaps.clear()
        self._ready = {}


def request(runner: Any, gate: Gate, msg: dict[str, Any], deadline: float, calls: int,
            step: Callable[[int], None]) -> Any:
    """`runner.request` of a gated batch: the command, then the judge's part between its calls, then its
    answer. The runner answering early (an error), dying or passing the deadline ends the gate (ABORT): its
    answer is read as any other."""
    from kevolve.sandbox.common.channel import ChannelClosed

    w = gate.words
    w.reset()
    runner.freeze(False)
    try:
        runner.ch.send(msg, alive=runner.alive)
    except ChannelClosed:
        return runner._closed()

    def stop() -> bool:
        return (time.monotonic() > deadline or not runner.alive()
                or bool(select.select([runner.ch.rfd], [], [], 0)[0]))

    for k in range(calls - 1):
        if not w.wait(DONE, k + 1, stop):
            w.w[ABORT] = 1
            break
        try:
            step(k)
        except BaseException:
            w.w[ABORT] = 1  # the runner stops waiting; the judge's own failure goes on up
            raise
        w.w[GO] = k + 1
    return runner.receive(deadline)


__all__ = ["GATE", "Gate", "enabled", "request"]
