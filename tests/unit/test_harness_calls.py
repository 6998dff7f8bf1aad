"""What a call of the harness costs beside forward (clock.NET, GPU): the runner's null calls and the judge's arithmetic.

The null calls run here on the CPU through the runner's own `Stepper.batch` (the fences are the GPU's: tests/gpu and
scripts/gpu_fence.sh measure them there)."""

from __future__ import annotations

import pytest
import torch

from kevolve.sandbox.common.protocol import OutputSpec
from kevolve.sandbox.judge.clock import Window, both_sides, harness_ms
from kevolve.sandbox.runner.step import Stepper


def test_null_calls_stage_harness_bytes_of_the_outputs_shapes_and_run_no_model() -> None:
    specs = [OutputSpec(shape=(3, 5), dtype="torch.float32"), OutputSpec(shape=(7,), dtype="torch.int64")]
    sets = [tuple(torch.full(s.shape, -1, dtype=getattr(torch, s.dtype[6:])) for s in specs) for _ in range(3)]
    st = Stepper(torch.device("cpu"), specs, sets[0], vet_threads=False)
    st.prepare()
    res, vet = st.batch(None, [], sets, null=3)
    vet()
    assert res.calls == 3 and res.staged
    assert [tuple(o.shape) for o in res.outputs] == [(3, 5), (7,)]
    raw = st._flush_buf.view(torch.uint8)
    for staged in sets:  # each set holds the flush buffer's bytes, not the poison it had
        assert torch.equal(staged[0].view(torch.uint8).flatten(), raw[:60])
        assert torch.equal(staged[1].view(torch.uint8).flatten(), raw[256:256 + 56])


def test_the_harness_is_the_cheaper_sides_and_never_takes_most_of_a_call() -> None:
    empty, ref_empty = [Window(1.0, 0)], [Window(0.9, 0)]
    null, ref_null = [Window(1.0 + 16 * 0.05, 16)], [Window(0.9 + 16 * 0.04, 16)]
    assert harness_ms(null, empty, ref_null, ref_empty) == pytest.approx(0.04)
    assert harness_ms(null, empty, [], ref_empty) == 0.0  # both sides, or none
    # a candidate that slows its own null batches only lengthens its own time
    assert harness_ms([Window(1.0 + 16 * 9.0, 16)], empty, ref_null, ref_empty) == pytest.approx(0.04)
    cand, ref = both_sides([Window(0.9 + 16 * 0.1, 16)], empty, [Window(0.9 + 16 * 0.2, 16)], ref_empty, null,
                           ref_null)
    assert cand == [pytest.approx(0.06)] and ref == [pytest.approx(0.16)]
    # a harness read dearer than a call takes at most 80 % of it
    cand, ref = both_sides([Window(0.9 + 16 * 0.03, 16)], empty, [Window(0.9 + 16 * 0.2, 16)], ref_empty, null,
                           ref_null)
    assert cand == [pytest.approx(0.006)] and ref == [pytest.approx(0.2 - 0.024)]
    assert both_sides([Window(2.5, 16)], empty, [Window(4.1, 16)], ref_empty, [], [])[0] == [pytest.approx(0.1)]
