"""The judge's clock (sandbox/judge/clock.py) over hand-built windows: a call's time from batches, empties and the
kernel's CPU accounting; what a runner claims plays no part; how many calls a batch holds."""

from __future__ import annotations

import pytest
import torch

from kevolve.sandbox.judge.clock import BATCH_MAX, Window, batch_room, batch_size, call_times, empty_ms, per_call
from kevolve.sandbox.judge.slots import Slots


def test_a_calls_time_is_the_batch_less_an_empty_one_over_its_calls() -> None:
    windows = [Window(ms=2.5, calls=4), Window(ms=2.9, calls=4)]
    assert per_call(windows, empty=0.5, cpu=False) == [0.5, 0.6]


def test_the_runners_account_is_never_read() -> None:
    honest = [Window(ms=2.5, calls=4, claimed_ms=2.0)]
    forged = [Window(ms=2.5, calls=4, claimed_ms=0.01)]
    assert call_times(honest, [Window(0.5, 0)], []) == call_times(forged, [Window(0.5, 0)], [])


def test_a_candidate_that_slows_its_empty_batches_only_lengthens_its_own_time() -> None:
    ref_empty = [Window(0.5, 0)] * 3
    slowed = [Window(5.0, 0)] * 3  # it can tell an empty batch apart: no call in it
    assert empty_ms(slowed, ref_empty, cpu=False) == 0.5
    assert call_times([Window(2.5, 4)], slowed, ref_empty) == [0.5]


def test_on_the_cpu_the_kernels_cpu_accounting_is_read_where_every_window_has_it() -> None:
    # a loaded machine: the round trips hold milliseconds of waiting, the CPU time does not
    windows = [Window(ms=9.0, calls=2, cpu_ms=1.3), Window(ms=4.0, calls=2, cpu_ms=1.2)]
    empties = [Window(ms=1.0, calls=0, cpu_ms=0.3)]
    assert call_times(windows, empties, []) == pytest.approx([0.5, 0.45])
    partial = [*windows, Window(ms=3.0, calls=2)]  # one window without it: the round trips for all
    assert call_times(partial, empties, []) == pytest.approx([4.0, 1.5, 1.0])


def test_a_batch_holds_two_ms_of_the_references_work_within_its_bounds() -> None:
    assert batch_size(0.25, 1024, "cpu", 0) == 8
    assert batch_size(0.001, 1024, "cpu", 0) == BATCH_MAX
    assert batch_size(0.001, 1024, "cpu", 5) == 5  # never-seen draws: a fifth of them, at most
    assert batch_size(0.001, 200 * 2**20, "cpu", 0) == 1  # 256 MB of inputs and outputs
    assert batch_room(200 * 2**20, "cuda:0", 0) == 10  # 2 GiB on a GPU
    assert batch_size(None, 1024, "cpu", 0) == 1 and batch_size(5.0, 1024, "cpu", 0) == 1


def test_a_batch_gets_a_slot_per_draw_and_a_repeated_draw_reads_the_same_slot(tmp_path) -> None:  # noqa: ANN001
    draws = {k: [torch.full((4,), float(i))] for i, k in enumerate(["d0", "d1", "t0", "t1", "t2"])}
    slots = Slots(draws, True, tmp_path, torch.device("cpu"), hidden=["t0", "t1", "t2"], min_slots=3)
    picks = slots.slots_for(["t0", "t1", "t2"])
    assert len(set(picks)) == 3
    assert [float(slots.slots[i].values[0][0]) for i in picks] == [2.0, 3.0, 4.0]
    again = slots.slots_for(["d0", "d0", "d1"])
    assert again[0] == again[1] != again[2]
    slots.free()
