"""Where the judge is in a request, told to the parent as it goes (kevolve eval's live line; issue 37: eval was
silent for 20-40 s). Trusted both ways: the judge writes these, never a runner; the parent only shows them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

_sink: Callable[[str], None] | None = None


def report(phase: str) -> None:
    """Tell the parent the judge now works on `phase` (nothing when no request listens)."""
    if _sink is not None:
        try:
            _sink(phase)
        except Exception:  # noqa: BLE001 - progress is a courtesy: it never changes a verdict
            pass


@contextmanager
def to(sink: Callable[[str], None]) -> Iterator[None]:
    """Send `report`s to `sink` while one request is served."""
    global _sink
    old, _sink = _sink, sink
    try:
        yield
    finally:
        _sink = old


__all__ = ["report", "to"]
