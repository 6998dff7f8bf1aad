"""Ctrl-C and SIGTERM while the graph runs: held until the step in flight is checkpointed, then delivered.

Runs in the orchestrator's main thread (the handlers) and in LangGraph's checkpoint thread (the delivery).

A signal delivered as an exception while LangGraph waits for a step's tasks loses work: the tasks finish
after the exception, and the write of one that finishes while LangGraph shuts its thread pool down is never
saved (its done-callback cannot schedule the write), though its side effects are (a line in trials.jsonl, an
LLM call). On --resume that job runs again: its evaluation read back from disk, a second trial line, the
LLM asked again (issue 37: after a second Ctrl-C, 12 trial lines and 12 LLM calls for a 10-candidate run).
Held to the step's end, the exception leaves LangGraph with no task in flight and every write saved.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

log = logging.getLogger(__name__)

Handler = Callable[[int, FrameType | None], object]


class HeldSignal:
    """The first SIGINT / SIGTERM while the graph runs, held for `deliver`; a second one is delivered at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: tuple[Handler, int] | None = None
        self._previous: dict[int, Handler] = {}

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous[signum]
        with self._lock:
            again = self._held is not None
            self._held = None if again else (previous, signum)
        if again:  # the user insists: stop now, as an unheld signal does (and once: nothing is left held)
            previous(signum, frame)
            return
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        log.warning("%s: stopping once the proposals and evaluations in flight finish and are saved "
                    "(Ctrl-C again to stop at once)", name)

    def deliver(self) -> None:
        """Raise what the held signal's own handler raises (KeyboardInterrupt, the CLI's Terminated); else nothing.
        Called where no task is in flight: after a step's checkpoint is written, and when the graph returns."""
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            handler, signum = held
            handler(signum, None)

    @contextmanager
    def installed(self) -> Iterator[HeldSignal]:
        """Hold SIGINT and SIGTERM inside the block where their handlers raise (Python's KeyboardInterrupt, the
        CLI's Terminated); a default SIGTERM (the process ends, as after kill -9) and any signal outside the main
        thread are left alone. A signal still held when the block ends is delivered then."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(signum)
            if callable(previous):
                self._previous[signum] = previous
                signal.signal(signum, self._hold)
        try:
            yield self
        finally:
            for signum, previous in self._previous.items():
                signal.signal(signum, previous)
            self._previous.clear()
        self.deliver()


def holding_saver(saver_cls: type, held: HeldSignal) -> type:
    """A subclass of LangGraph's checkpointer `saver_cls` that delivers a held signal once each checkpoint is
    written: LangGraph waits for that write between steps (durability "sync"), so the exception reaches it with
    the step committed and the next one not started."""

    class HoldingSaver(saver_cls):  # type: ignore[misc, valid-type]
        def put(self, *args: object, **kwargs: object) -> object:
            saved = super().put(*args, **kwargs)
            held.deliver()
            return saved

    return HoldingSaver
