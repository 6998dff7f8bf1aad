"""Timing with clocks the candidate cannot patch.

The references below are taken when the worker imports this module, before any candidate code
runs; `integrity.Guards` reports any later replacement of them or of their code.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kevolve.records import TimingStats
from kevolve.sandbox.common import cuda_rt

_perf = time.perf_counter
_Event = torch.cuda.Event
_record = torch.cuda.Event.record
_elapsed = torch.cuda.Event.elapsed_time
_query = torch.cuda.Event.query
_cuda_sync = getattr(torch._C, "_cuda_synchronize", None)  # absent from CPU builds
_sleep = torch.cuda._sleep
_current_stream = torch.cuda.current_stream
_L2_FLUSH_BYTES = 256 * 2**20  # > 2x the L2 of any current GPU (H100: 50 MB)
_CPU_FLUSH_BYTES = 64 * 2**20
_KEEP = 6  # timed-call outputs copied out for checking, chosen by a private RNG


class Timer:
    """Times `fn(*inputs)` per trial with device-wide sync, cache flush and rotated inputs."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        nbytes = _L2_FLUSH_BYTES if self.cuda else _CPU_FLUSH_BYTES
        self._flush_buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)
        self._rng = random.Random(int.from_bytes(os.urandom(8), "little"))

    def sync(self) -> None:
        if self.cuda:
            _cuda_sync()  # type: ignore[misc]

    def _flush(self) -> None:
        if self.cuda:  # demote persisting lines first, or they would survive the flush below
            cuda_rt.reset_persisting_l2()
        self._flush_buf.fill_(self._rng.randrange(1 << 30))

    def _calibrate(self, fn: Callable[..., Any], inputs: Sequence[Any]) -> None:
        """Size the sleep that keeps the GPU busy while the host enqueues one forward call.

        With the queue pre-filled, the events measure the forward's device time rather than
        host launch jitter (which moved repeat measurements by 20% on an H200); a forward whose
        host side takes longer than the pad still shows that time, since the GPU then idles.
        """
        a, b = _Event(enable_timing=True), _Event(enable_timing=True)
        _cuda_sync()  # type: ignore[misc]
        _record(a)
        _sleep(1_000_000)
        _record(b)
        _cuda_sync()  # type: ignore[misc]
        cycles_per_ms = 1_000_000 / max(_elapsed(a, b), 1e-3)
        _cuda_sync()  # type: ignore[misc]
        h0 = _perf()
        fn(*inputs)
        host_ms = (_perf() - h0) * 1e3
        _cuda_sync()  # type: ignore[misc]
        self._pad_cycles = int(cycles_per_ms * min(max(2 * host_ms + 0.02, 0.05), 20.0))

    def one(self, fn: Callable[..., Any], inputs: Sequence[Any]) -> tuple[float, float, Any]:
        """One trial: (event-or-host ms, ms until every stream was done, output)."""
        self._flush()
        self.sync()
        if not self.cuda:
            h0 = _perf()
            out = fn(*inputs)
            ms = (_perf() - h0) * 1e3
            return ms, ms, out
        start, end, done = (_Event(enable_timing=True) for _ in range(3))
        _sleep(self._pad_cycles)
        _record(start)
        out = fn(*inputs)
        _record(end)
        _cuda_sync()  # type: ignore[misc]  # device-wide: side-stream work is waited for here
        _record(done)
        _cuda_sync()  # type: ignore[misc]
        return _elapsed(start, end), _elapsed(start, done), out

    def run(self, fn: Callable[..., Any], pool: Sequence[Sequence[Any]], keys: Sequence[str],
            trials: int, max_s: float, warmup: int,
            on_output: Callable[[str, Any], None] | None = None,
            fresh: Sequence[Sequence[Any]] = ()) -> TimingStats:
        """Adaptive trials: at least `trials`, more while the median is unsteady, within `max_s`.

        Outputs of a uniform sample of the timed calls (a reservoir over the whole run, drawn
        with a private RNG) and of the last call go to `on_output` as CPU copies. Each `fresh`
        input set is timed once, interleaved, never before seen by the candidate: their times
        (`self.fresh_ms`) show a cache keyed on input content, which the rotated pool cannot.
        """
        self.fresh_ms: list[float] = []
        if self.cuda:
            self._calibrate(fn, pool[0])
        for i in range(warmup):
            self.one(fn, pool[i % len(pool)])
        times: list[float] = []
        walls: list[float] = []
        t0 = _perf()
        kept: list[tuple[str, Any]] = []
        last: tuple[str, Any] | None = None
        fresh_left = list(fresh)
        while True:
            i = len(times)
            ms, wall, out = self.one(fn, pool[i % len(pool)])
            times.append(ms)
            walls.append(wall)
            last = (keys[i % len(pool)], out)
            if on_output is not None:
                j = i if i < _KEEP else self._rng.randrange(i + 1)
                if j < _KEEP:  # reservoir sampling: every timed call equally likely to be checked
                    item = (keys[i % len(pool)], _cpu_copy(out))
                    if j < len(kept):
                        kept[j] = item
                    else:
                        kept.append(item)
            if fresh_left and i % 8 == 7:
                self.fresh_ms.append(self.one(fn, fresh_left.pop())[0])
            if self._enough(times, trials, _perf() - t0, max_s):
                break
        for x in fresh_left:
            self.fresh_ms.append(self.one(fn, x)[0])
        if on_output is not None and last is not None:
            for key, out in kept + [(last[0], _cpu_copy(last[1]))]:  # the last call is always checked
                on_output(key, out)
        method = ("cuda_events+prefilled_queue+device_sync+l2_flush+rotated_inputs" if self.cuda
                  else "host_clock+cache_flush+rotated_inputs")
        return stats(times, method, walls if self.cuda else None)

    @staticmethod
    def _enough(times: list[float], trials: int, elapsed: float, max_s: float) -> bool:
        """The stop rule (steady below) for one side, or out of time with at least five calls."""
        return (elapsed >= max_s and len(times) >= 5) or steady(times, trials)


def _cpu_copy(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.detach().to("cpu", copy=True)
    if isinstance(out, (list, tuple)):
        return [_cpu_copy(o) for o in out]
    return out


def steady(times: list[float], trials: int) -> bool:
    """At least `trials` times (and 3) and a median known to within 0.5 % (or ten times `trials`): the one stop
    rule, for the runner's own timer here and for the judge's batches (judge/schedule.enough)."""
    n = len(times)
    if n < max(3, trials):
        return False
    if n >= 10 * trials:
        return True
    q = statistics.quantiles(times, n=4)
    med = statistics.median(times)
    rel_sem = 1.2533 * ((q[2] - q[0]) / 1.349) / (n**0.5) / max(med, 1e-9)
    return rel_sem <= 0.005


def stats(times: list[float], method: str, walls: list[float] | None = None,
          claimed: list[float] | None = None, stopped: str = "", alone: list[float] | None = None) -> TimingStats:
    """Median, mean, spread of `times` (ms) as a record; `walls`, `claimed` and `alone` as their medians where given;
    `stopped`: why the timing stopped where it did."""
    q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
    return TimingStats(
        median_ms=statistics.median(times), mean_ms=statistics.fmean(times), min_ms=min(times),
        max_ms=max(times), iqr_ms=q[2] - q[0], trials=len(times), method=method,
        wall_median_ms=statistics.median(walls) if walls else None,
        claimed_median_ms=statistics.median(claimed) if claimed else None, stopped=stopped or None,
        alone_median_ms=statistics.median(alone) if alone else None,
    )
