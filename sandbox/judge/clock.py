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
# GPU: a call's time net of the harness around it (`harness_ms`: its output checks, staging copy and fences, the
# same on both sides, read from batches of null calls), KEVOLVE_GPU_NET=1. Off until measured side by side: on the
# H200 (2026-11-29) eager's cumprod read 0.063-0.122 ms a call by the judge's clock around 0.025 ms of kernel
NET = os.environ.get("KEVOLVE_GPU_NET", "") in ("1", "on", "yes")
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


def harness_ms(null: list[Window], empty: list[Window], ref_null: list[Window], ref_empty: list[Window]) -> float:
    """What a call of the harness costs (ms) beside forward: per side, the median over its null batches of (null
    batch - its empty median) / calls; the smaller of the two sides (a candidate that slows its own null batches
    only lengthens its own time, as with `empty_ms`); 0 unless both sides have them."""
    sides = []
    for nl, em in ((null, empty), (ref_null, ref_empty)):
        if not nl or not em:
            return 0.0
        e = statistics.median(w.ms for w in em)
        sides.append(statistics.median(max(w.ms - e, 0.0) / w.calls for w in nl if w.calls))
    return min(sides)


def both_sides(batches: list[Window], empty: list[Window], ref_batches: list[Window], ref_empty: list[Window],
               null: list[Window], ref_null: list[Window]) -> tuple[list[float], list[float]]:
    """A call's time per timed batch, the candidate's and the reference's (ms): `call_times`, each less the harness
    (`harness_ms`, the same on both sides), which never takes more than 80 % of either side's median call (a
    harness read dearer than a call by noise would leave a call of a microsecond: an unearned ratio)."""
    cand, ref = call_times(batches, empty, ref_empty), call_times(ref_batches, ref_empty, [])
    net = harness_ms(null, empty, ref_null, ref_empty)
    if net <= 0 or not cand or not ref:
        return cand, ref
    net = min(net, 0.8 * statistics.median(cand), 0.8 * statistics.median(ref))
    return [max(t - net, 1e-3) for t in cand], [max(t - net, 1e-3) for t in ref]


__all__ = ["BATCH_MAX", "BATCH_MS", "EMPTY_EVERY", "FENCE", "METHOD", "NET", "both_sides", "harness_ms", "Window", "batch_room", "batch_size", "call_times",
           "empty_ms", "method", "per_call", "uses_cpu_time"]


def method(is_cuda: bool) -> str:
    """How speeds are measured: the judge's own clock around batches that end in a device-wide sync (GPU), less an
    empty batch's round trip; caches flushed by the judge before each batch."""
    return (f"{METHOD}: batches+device_sync{'' if FENCE == 'none' else '_per_call'}{'+net_of_harness' if NET else ''}"
            "+l2_flush(judge)+never_seen_inputs" if is_cuda
            else f"{METHOD}: batches+cache_flush(judge)+never_seen_inputs")
