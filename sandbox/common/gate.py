"""A timed batch's gate: a call's values exist only once the call before it has handed its outputs over.

Loaded by the judge (trusted) and by runners. A batch is timed as one command (clock.py), so its draws used
to be copied into their slots before the command: the first call of a batch could read every later call's
values and do the whole batch's work at once, fused and in parallel, and answer the later calls from what it
had made (red team 9 on the H200: a CuPy cumprod 2.68x its honest twin's speed, a ReLU 1.40x, a Triton
softmax 1.66x, correct on every call). Gated, the judge copies call k+1's values in only when the runner says
call k is done, after it has taken a copy of call k's staged outputs: a runner that says "done" before it has
the outputs is judged on what was there (incorrect), and one that says it after has done call k alone. There
is no later value to read early, so nothing to detect; the class is closed by what is in memory when.

The words live in a small file in the runner's scratch that both map (unlinked once the runner has it). The
runner writes DONE; the judge writes GO and ABORT. A candidate can write any word: a GO it writes itself lets
it run a call on the stale values of its slot (judged incorrect), a DONE written early gets it the next values
only after the judge has copied the outputs it had then. Each side spins while it waits (the judge's work
between two calls is a few copies: tens of microseconds), then sleeps in 50 us steps.
"""

from __future__ import annotations

import mmap
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

DONE, GO, ABORT = 0, 1, 2
_BYTES = 64
_SPIN_S = 0.002  # busy-wait this long, then sleep in steps


class Words:
    """The shared words (int64), mapped from the file `name` in `folder`."""

    def __init__(self, folder: Path, name: str | None = None) -> None:
        self.name = name or f"gate-{uuid.uuid4().hex[:12]}"
        path = folder / self.name
        if name is None:
            with open(path, "wb") as f:
                f.truncate(_BYTES)
            os.chmod(path, 0o666)  # a container's runner may run as another user (the dir is private)
        elif "/" in name or not path.is_file():
            raise ValueError(f"no gate file {name}")
        fd = os.open(path, os.O_RDWR)
        try:
            self._map = mmap.mmap(fd, _BYTES)
        finally:
            os.close(fd)
        self.w = memoryview(self._map).cast("q")
        self._path: Path | None = path if name is None else None

    def hide(self) -> None:
        """The file's name removed once the runner has mapped it (transport.SharedBuffer.hide)."""
        if self._path is not None:
            try:
                os.unlink(self._path)
            except OSError:
                pass
            self._path = None

    def reset(self) -> None:
        self.w[DONE] = self.w[GO] = self.w[ABORT] = 0

    def wait(self, word: int, at_least: int, stop: Callable[[], bool] | None = None) -> bool:
        """Until words[word] >= at_least (True), or ABORT is set or `stop()` says so (False); `stop` is asked
        between sleeps only."""
        w = self.w
        t0 = time.perf_counter()
        while w[word] < at_least:
            if w[ABORT]:
                return False
            if time.perf_counter() - t0 > _SPIN_S:
                if stop is not None and stop():
                    return False
                time.sleep(50e-6)
        return True


__all__ = ["ABORT", "DONE", "GO", "Words"]
