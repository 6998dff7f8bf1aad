"""One draw as the judge keeps it (inputs, truth, eager's own error), and the timing draws: every timed call on
values no call had before (runs in the judge, trusted; oracle.prepare makes the problem's draws)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from kevolve.sandbox.common import harness as h
from kevolve.sandbox.common.protocol import Draw, DrawReport
from kevolve.sandbox.judge.clock import batch_room
from kevolve.sandbox.judge.fitting import nbytes
from kevolve.sandbox.judge.reference import eager_errors, truth_of, with_own_variation
from kevolve.sandbox.judge.residency import Remake, eligible, kept

# Timing draws: each timed call on values no call has had before, so that an answer kept from an
# earlier call never serves a timed one (red team 2026-11-26: a memo checked on 64 sampled values read
# 1.6x on the pool's four repeating draws). As many as fit these budgets, at most TIMING_MAX; with
# fewer than TIMING_MIN kept, made again when their call comes (CPU) or the timed calls rotate through the pool
# (the GPU, where the never-seen calls' input_cache rule sees a memo).
TIMING_MAX, TIMING_MIN = 256, 8
TIMING_BYTES, TIMING_S, SMALL_DRAW = 256 * 2**20, 3.0, 8 * 2**20
# where timing draws too large to keep are made again. The GPU since 2026-11-29: on a 64 MB ReLU (H200) 15 batches of
# 16 on draws made again took 2.8 s of timing, against 10 s (the limit) for 115-134 batches rotating through the
# pool, at the same speed read (0.445/0.467x, 0.374/0.369x). KEVOLVE_REMADE_TIMING (devices, comma-separated) sets
# it for a measurement side by side: the judge's own environment (parent/local.py), never a candidate's
REMADE_TIMING = tuple(os.environ.get("KEVOLVE_REMADE_TIMING", "cpu,cuda").split(","))
# On the GPU, as many kept timing draws and bytes as "MAX,MB" (KEVOLVE_GPU_TIMING_DRAWS, the judge's environment):
# a small problem's draws run out after five batches under the CPU's 256 MB (H200, 2026-11-29: exp_wide's 2 MB draws,
# 5 batches of 25, its median's spread near the median), where the device has room for many more. Unset: the CPU's
# budgets, the measured default; a side-by-side measurement first (scripts/gpu_fence.sh SIDES)
_GPU_DRAWS = os.environ.get("KEVOLVE_GPU_TIMING_DRAWS", "")
REMADE_MAX_S = 10.0  # one draw made again (inputs, float64 truth) at most this, else the pool: each timed pair costs it
# On the GPU a timed batch holds up to clock.BATCH_MAX calls, each on its own draw made again (inputs twice, truth
# once) and five batches are the least timed: the draws one batch takes, made once, at most this (a float64
# convolution can take seconds on the device: 32 draws of 2 s would add minutes to every evaluation)
REMADE_BATCH_S = 4.0


@dataclass
class DrawData:
    """One draw: pristine inputs, the truth a candidate is judged against, eager's own error."""

    draw: Draw
    inputs: list[Any]
    truth: list[torch.Tensor]
    report: DrawReport
    remake: Remake | None = None  # residency "regenerated": inputs and truth above are shapes; made again when used
    input_print: tuple[int, ...] = ()  # the inputs' fingerprint, to check each remaking against

    @property
    def eager_err(self) -> tuple[tuple[float, ...], ...]:
        return self.report.eager_err


def timing_draws(draws: dict[str, DrawData], module: ModuleType, model: Any, f64: Any, device: torch.device,
                  memory_limit: int | None, varies: bool) -> None:
    """Add the timing draws `t0`, `t1` … (plain draws under seeds nobody can predict, with their truth)
    while they fit TIMING_BYTES (and an eighth of `memory_limit`) and TIMING_S (past TIMING_MIN; at most four
    times it to reach that). Where fewer than TIMING_MIN fit, TIMING_MAX of them are made when their call comes
    (`_remade_timing`); else none, and the timed calls rotate through the pool.
    A small draw on the CPU is made on one thread: on a busy machine its ops' threads wait on each other (CI,
    2026-11-29: under 8 draws of a 64x1024 ReLU in 3 s; 190 on two threads beside three busy processes, all
    256 on one thread in 1.2 s, this VM). The caller restores the thread count."""
    first = next(iter(draws.values()))
    each = max(nbytes(first.inputs) + nbytes(first.truth), 1)
    most, budget = gpu_budgets(_GPU_DRAWS) if device.type == "cuda" else (TIMING_MAX, TIMING_BYTES)
    room = min(budget, memory_limit // 8 if memory_limit else budget)
    n = min(most, room // each)
    if n < TIMING_MIN:
        return _remade_timing(draws, module, model, f64, device, varies)
    if device.type == "cpu" and each <= SMALL_DRAW:
        torch.set_num_threads(1)
    t0, added = time.perf_counter(), []
    for i in range(n):
        spent = time.perf_counter() - t0
        if spent > TIMING_S and (len(added) >= TIMING_MIN or spent > 4 * TIMING_S):
            break
        made = _timing_draw(Draw(key=f"t{i}", seed=int.from_bytes(os.urandom(4), "little") >> 1), first, module, model,
                            f64, device, varies)
        if made is not None:
            draws[made.draw.key] = made
            added.append(made.draw.key)
    if len(added) < TIMING_MIN:
        for k in added:
            del draws[k]


def _remade_timing(draws: dict[str, DrawData], module: ModuleType, model: Any, f64: Any, device: torch.device,
                   varies: bool) -> None:
    """TIMING_MAX timing draws kept as seeds only, made again when their call comes (residency.Remake: inputs
    checked against the print of their first making, truth from the float64 forward), where the problem's draws
    are too large to keep that many (red team 7: on 36 MB draws the timed calls rotated through the pool, and a
    memo of its answers that stayed under input_cache's bound read 1.2x unearned). Only where a draw comes out the
    same bits when made again (the first pool draw, made once more) at a cost `worth_remaking`, and on the devices in
    REMADE_TIMING. Eager's own error on them: the pool draws' largest (they are drawn alike). Past that cost the
    timed calls rotate through the pool and input_cache reads them (red team 8's six rounds of tanh in float64 on
    9M values took over 2 s on a busy machine: a memo read 26x before input_cache read the timed calls)."""
    first = next(iter(draws.values()))
    if device.type not in REMADE_TIMING or varies:
        return
    remake = Remake(module, model, f64, device, lambda a, b: errors_and_truth(a, b, device)[1], first.truth)
    t0 = time.perf_counter()
    if not (remake.same(first.draw, first.inputs, first.truth)
            and worth_remaking(device.type, time.perf_counter() - t0, nbytes(first.inputs) + nbytes(first.truth))
            and eligible(model, varies, 0.0, nbytes(first.inputs), nbytes(first.truth), device)):
        return
    pool = [d.report for k, d in draws.items() if k.startswith("d") and d.draw.transform == "identity"]
    errs = tuple(tuple(max(e) for e in zip(*per, strict=True))
                 for per in zip(*(r.eager_err for r in pool), strict=True))
    vs = [r.eager_vs_f64 for r in pool if r.eager_vs_f64 is not None]
    shapes = kept(first.inputs, first.truth)
    for i in range(TIMING_MAX):
        d = Draw(key=f"t{i}", seed=int.from_bytes(os.urandom(4), "little") >> 1)
        draws[d.key] = DrawData(d, *shapes, DrawReport(key=d.key, finite=True, eager_err=errs,
                                                       eager_vs_f64=max(vs) if vs else None), remake)


def gpu_budgets(spec: str) -> tuple[int, int]:
    """(most kept timing draws, their bytes) on the GPU from KEVOLVE_GPU_TIMING_DRAWS ("MAX,MB"); the CPU's where unset
    or unreadable (never fewer than the CPU's)."""
    try:
        most, mb = (int(v) for v in spec.split(","))
    except ValueError:
        return TIMING_MAX, TIMING_BYTES
    return max(TIMING_MAX, most), max(TIMING_BYTES, mb * 2**20)


def worth_remaking(device: str, cost_s: float, call_bytes: int) -> bool:
    """Timing draws made again, where making one (inputs and truth) took `cost_s`: within REMADE_MAX_S a draw, and on
    the GPU, where a batch holds several calls, within REMADE_BATCH_S for the draws of the largest batch the draws'
    size allows (clock.batch_room). Else the timed calls rotate through the pool (input_cache reads them)."""
    if cost_s > REMADE_MAX_S:
        return False
    return device != "cuda" or cost_s * batch_room(call_bytes, device, 0) <= REMADE_BATCH_S


def _timing_draw(d: Draw, first: DrawData, module: ModuleType, model: Any, f64: Any, device: torch.device,
                 varies: bool) -> DrawData | None:
    """One timing draw, kept; None where the reference fails on it or is not finite there."""
    x = h.draw_inputs(module, d, device)
    try:
        with torch.no_grad():
            y = [t.detach() for t in h.flatten_outputs(model(*x))]
    except Exception:  # noqa: BLE001 - a plain draw the reference fails on: fewer timing draws
        return None
    if [t.shape for t in y] != [t.shape for t in first.truth] or not all(
            bool(torch.isfinite(t).all()) for t in y if t.is_floating_point()):
        return None
    y64 = f64(x)
    if y64 is not None and [t.shape for t in y64] != [t.shape for t in y]:
        y64 = None
    errs, truth = errors_and_truth(y, y64, device)
    if varies and (second := again(model, x)) is not None:
        errs = with_own_variation(errs, y, second)
    vs = None if y64 is None else max((e[0] for e in errs), default=0.0)
    return DrawData(d, x, truth, DrawReport(key=d.key, finite=True, eager_err=errs, eager_vs_f64=vs))


def again(model: Any, x: list[Any]) -> list[torch.Tensor] | None:
    """The reference's outputs once more on the same inputs (None where that call fails)."""
    try:
        with torch.no_grad():
            return [t.detach() for t in h.flatten_outputs(model(*x))]
    except Exception:  # noqa: BLE001 - it ran once on these inputs; a second failure only means no estimate
        return None


def errors_and_truth(y: list[torch.Tensor], y64: list[torch.Tensor] | None, device: torch.device,
                      ) -> tuple[tuple[tuple[float, ...], ...], list[torch.Tensor]]:
    """Eager's error against the float64 result, and the truth (rounded to the outputs' dtypes, on `device`).

    Compared where the float64 result is; on the CPU when it was computed there (no float64 kernel on the
    device, or no room), or when the comparison itself finds no room on the device (KernelBench L1 87's
    8.6 GB output: its 17 GB float64 result fit, the comparison's mask did not; H100, 2026-11-25). Only the
    rounded truth goes to the device: moving the float64 result first ran a 7.5 GB-a-tensor InstanceNorm's
    judge out of device memory."""
    if y64 is not None and all(t.device.type == device.type for t in y64):
        try:
            return eager_errors(y, y64), truth_of(y, y64)
        except torch.OutOfMemoryError:
            pass
        y64[:] = [t.cpu() for t in y64]  # in place: the caller's list lets go of the device copies
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if y64 is None:
        return eager_errors(y, y64), truth_of(y, y64)
    y_cpu = [t.cpu() for t in y]
    return eager_errors(y_cpu, y64), [t.to(device) for t in truth_of(y_cpu, y64)]


__all__ = ["DrawData", "REMADE_BATCH_S", "gpu_budgets", "REMADE_MAX_S", "REMADE_TIMING", "SMALL_DRAW", "TIMING_BYTES", "TIMING_MAX",
           "TIMING_MIN", "TIMING_S", "again", "errors_and_truth", "timing_draws", "worth_remaking"]
