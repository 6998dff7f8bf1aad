"""Length-prefixed JSON frames between the judge and a runner (or the parent and the judge).

A runner is untrusted: whatever it writes is read with a size limit and a deadline, and a frame
that is not a JSON object is `Garbled`, never an exception the reader did not ask for. The
channel runs over two file descriptors (pipes, or FIFOs in the runner's scratch directory, which
work the same inside bubblewrap and a container's bind mount).
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_FRAME = 64 * 2**20  # a profile with thousands of kernels stays far below this


def _no_lone_surrogates(obj: Any) -> Any:
    """`obj` with every lone surrogate (JSON's "\\udcff" alone) replaced by U+FFFD: such a string cannot be
    written as UTF-8, and one in a candidate's exception text stopped `kevolve eval` from printing its
    verdict (red team, 2026-11-26). A valid pair becomes the character it encodes."""
    if isinstance(obj, str):
        return obj.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(obj, list):
        return [_no_lone_surrogates(v) for v in obj]
    if isinstance(obj, dict):
        return {_no_lone_surrogates(k): _no_lone_surrogates(v) for k, v in obj.items()}
    return obj


class ChannelClosed(Exception):
    """The other end closed its side (exited, crashed, or was killed)."""


class Garbled(Exception):
    """The other end sent something that is not a frame of a JSON object."""


class Channel:
    """Frames over a read fd and a write fd; `recv` takes a deadline."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd = rfd, wfd
        self._buf = b""

    @classmethod
    def fifos(cls, folder: Path, reader: str, writer: str) -> Channel:
        """Open two FIFOs created by `make_fifos` (the runner's side opens them in the same order)."""
        rfd = os.open(folder / reader, os.O_RDWR)  # RDWR: no EOF while the other side is not open yet
        wfd = os.open(folder / writer, os.O_RDWR)
        return cls(rfd, wfd)

    def send(self, obj: dict[str, Any], alive: Callable[[], bool] | None = None) -> None:
        """Write one frame; with `alive`, never block on a reader that has died (ChannelClosed)."""
        if self.wfd < 0:
            raise ChannelClosed("closed")
        data = json.dumps(obj, separators=(",", ":")).encode()
        frame = struct.pack(">I", len(data)) + data
        view = memoryview(frame)
        if alive is not None:
            os.set_blocking(self.wfd, False)
        while view:
            if alive is not None:
                _, writable, _ = select.select([], [self.wfd], [], 0.2)
                if not writable:
                    if not alive():
                        raise ChannelClosed("peer gone")
                    continue
            try:
                n = os.write(self.wfd, view)
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise ChannelClosed("peer closed") from None
            view = view[n:]

    def recv(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next frame, or None if none arrived before `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.rfd < 0:
            raise ChannelClosed("closed")
        while True:
            if len(self._buf) >= 4:
                (size,) = struct.unpack(">I", self._buf[:4])
                if size > MAX_FRAME:
                    raise Garbled(f"frame of {size} bytes")
                if len(self._buf) >= 4 + size:
                    data, self._buf = self._buf[4:4 + size], self._buf[4 + size:]
                    try:
                        obj = json.loads(data)
                    except ValueError:
                        raise Garbled("frame is not JSON") from None
                    if not isinstance(obj, dict):
                        raise Garbled("frame is not a JSON object")
                    return _no_lone_surrogates(obj) if b"\\u" in data else obj
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            ready, _, _ = select.select([self.rfd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                raise ChannelClosed("peer closed")
            self._buf += chunk

    def close(self) -> None:
        """Close both ends, once: a second close could hit a descriptor number reused since."""
        fds, self.rfd, self.wfd = (self.rfd, self.wfd), -1, -1
        for fd in fds:
            if fd < 0:
                continue
            try:
                os.close(fd)
            except OSError:
                pass


def make_fifos(folder: Path, *names: str) -> None:
    for name in names:
        os.mkfifo(folder / name, 0o600)


__all__ = ["Channel", "ChannelClosed", "Garbled", "MAX_FRAME", "make_fifos"]
