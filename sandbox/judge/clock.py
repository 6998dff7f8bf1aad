"""The judge's clock: the only clock a speed is read from (runs in the judge, trusted).

A timed measurement is one command to a runner: a batch of calls on values it has never seen, each
call's outputs staged for the judge, then one device-wide synchronisation, then its answer. The judge
times the command's round trip itself (`time.perf_counter` in its own process, which no candidate
reaches). A call's time is that round trip less an empty batch's round trip (the same command with
no call in it), divided by the calls in the batch. The reference's batches run the same runner code
on the same schedule, interleaved, and stage their outputs alike (not compared: it is trusted), so
both windows hold the same harness work. On the CPU the reading is the runner's CPU time across the
command by the kernel's accounting of its cgroup (read by the judge before the command and at the
account, the runner holding still until the judge lets it vet): a loaded machine's scheduling delays
are not in it, and every thread and process of the candidate's is. Where no cgroup is delegated, the
round trip.

The empty round trip taken off a candidate's batches is the smaller of its own runner's and the
reference's: a candidate that makes its empty batches slow (it can tell them apart: they hold no call)
only makes its own time longer. What a runner reports of its times is a diagnostic only.

Batches: a call shorter than the noise of one round trip (pipes, process wake-ups: tens of
microseconds, more on a loaded machine) is timed in a batch long enough to hold BATCH_MS of the
reference's work, within the memory a batch's inputs and staged outputs take (BATCH_BYTES) and the
draws at hand (each call in a batch reads its own values: distinct slots, so no call reads what the
one before it left in the cache; the judge flushes the caches before the command, not between calls).
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass

BATCH_MS = 2.0  # the reference's work a batch should hold (ms)
BATCH_MAX = 32  # calls in one batch, at most
# a batch's inputs and staged outputs together, at most: CPU, GPU
BATCH_BYTES = {"cpu": 256 * 2**20, "cuda": 2 * 2**30}
EMPTY_EVERY = 1  # an empty batch on each side after this many timed pairs (and before the first)
# GPU: each call of a batch alone on the device (runner/step.py `batch`): "full" (a device-wide sync after forward
# and after its staging), "after" (after the staging only), "none" (back to back, before 2026-11-29: a stream that
# never waited for the caller's ran the calls of a batch at once). KEVOLVE_GPU_FENCE: the judge's own environment
# (parent/local.py), for a measurement side by side
FENCE = os.environ.get("KEVOLVE_GPU_FENCE", "full")
METHOD = "judge_clock"


@dataclass(frozen=True)
class Window:
    """One command timed by the judge: its round trip (ms), the calls it held, and (CPU) the runner's CPU
    time across it by the kernel's accounting (its cgroup), read by the judge before the command and at
    the account."""

    ms: float
    calls: int
    claimed_ms: float = 0.0  # the runner's own account of the whole batch (a diagnostic)
    cpu_ms: float | None = None

    def clock(self, cpu: bool) -> float:
        """The reading a speed is made of: CPU time on the CPU where the kernel counts it, else the round trip."""
        return self.cpu_ms if cpu and self.cpu_ms is not None else self.ms


def batch_room(call_bytes: int, device: str, draws: int) -> int:
    """The most calls a batch may hold: BATCH_MAX, within BATCH_BYTES and `draws` (the never-seen values
    the batches may use: a fifth of them, so that at least five batches are timed; 0 where there are none
    and the batches rotate through the pool, a draw read by several calls of a batch: only problems too
    large for never-seen draws do that, whose inputs no cache holds from one call to the next)."""
    room = BATCH_BYTES["cuda" if device.startswith("cuda") else "cpu"] // max(call_bytes, 1)
    return max(1, min(BATCH_MAX, room, draws or BATCH_MAX))


def batch_size(eager_ms: float | None, call_bytes: int, device: str, draws: int) -> int:
    """Calls per timed batch: enough for BATCH_MS of the reference's work, within `batch_room`."""
    if not eager_ms or eager_ms <= 0:
        return 1
    return max(1, min(math.ceil(BATCH_MS / eager_ms), batch_room(call_bytes, device, draws)))


def uses_cpu_time(windows: list[Window]) -> bool:
    """Read by CPU time: a CPU problem's windows (cpu_ms set by the session) where every one has it."""
    return bool(windows) and all(w.cpu_ms is not None for w in windows)


def empty_ms(own: list[Window], reference: list[Window], cpu: bool) -> float:
    """An empty batch's reading taken off a candidate's: the smaller median of the two sides."""
    meds = [statistics.median(w.clock(cpu) for w in x) for x in (own, reference) if x]
    return min(meds) if meds else 0.0


def per_call(windows: list[Window], empty: float, cpu: bool) -> list[float]:
    """One time per batch: what a call took (ms), as above. Never below a microsecond."""
    return [max((w.clock(cpu) - empty) / w.calls, 1e-3) for w in windows if w.calls]


def call_times(windows: list[Window], empties: list[Window], other_empties: list[Window]) -> list[float]:
    """`per_call` of one side's timed windows against its empties (and, for a candidate, the reference's:
    `empty_ms`), by CPU time where every window of the side has it."""
    cpu = uses_cpu_time(windows + empties + other_empties)
    return per_call(windows, empty_ms(empties, other_empties, cpu), cpu)


__all__ = ["BATCH_MAX", "BATCH_MS", "EMPTY_EVERY", "FENCE", "METHOD", "Window", "batch_room", "batch_size", "call_times",
           "empty_ms", "method", "per_call", "uses_cpu_time"]


def method(is_cuda: bool) -> str:
    """How speeds are measured: the judge's own clock around batches that end in a device-wide sync (GPU), less an
    empty batch's round trip; caches flushed by the judge before each batch."""
    return (f"{METHOD}: batches+device_sync{'' if FENCE == 'none' else '_per_call'}+l2_flush(judge)+never_seen_inputs"
            if is_cuda
            else f"{METHOD}: batches+cache_flush(judge)+never_seen_inputs")
