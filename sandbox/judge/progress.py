"""Where the judge is in a request, told to the parent as it goes (kevolve eval's live line; issue 37: eval was
silent for 20-40 s). Trusted both ways: the judge writes these, never a runner; the parent only shows them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kevolve.sandbox.common.protocol import Progress

_sink: Callable[[Progress], None] | None = None


def report(phase: str, left_s: float | None = None) -> None:
    """Tell the parent the judge now works on `phase`, `left_s` at most left until its reply where it can tell
    (eta.py; nothing when no request listens)."""
    if _sink is not None:
        try:
            _sink(Progress(phase=phase, left_s=left_s))
        except Exception:  # noqa: BLE001 - progress is a courtesy: it never changes a verdict
            pass


@contextmanager
def to(sink: Callable[[Progress], None]) -> Iterator[None]:
    """Send `report`s to `sink` while one request is served."""
    global _sink
    old, _sink = _sink, sink
    try:
        yield
    finally:
        _sink = old


__all__ = ["report", "to"]
