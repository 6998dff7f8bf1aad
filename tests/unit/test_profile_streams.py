"""The profiled call's stream rule (common/profile._device_kernels) on the events the profiler hands it: work on
another stream must start after the lead spin on the caller's stream and end before the end marker starts.

The events are stand-ins with kineto's accessors: the profiler's GPU events exist only on a GPU (tests/gpu runs the
real ones: relu_unordered_start, relu_side_stream, relu_side_stream_pad)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kevolve.sandbox.common.profile import _device_kernels

MAIN, SIDE = 7, 13
SPIN = "void at::cuda::(anonymous namespace)::spin_kernel<long>(long)"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, ...)"


@dataclass
class Ev:
    n: str
    stream: int
    start: int
    dur: int

    def device_type(self) -> torch.autograd.DeviceType:
        return torch.autograd.DeviceType.CUDA

    def name(self) -> str:
        return self.n

    def start_ns(self) -> int:
        return self.start

    def duration_ns(self) -> int:
        return self.dur

    def device_resource_id(self) -> int:
        return self.stream


class Prof:
    def __init__(self, evs: list[Ev]) -> None:
        self.profiler = self
        self.kineto_results = self
        self._evs = evs

    def events(self) -> list[Ev]:
        return self._evs


def rule(*work: Ev, lead: bool = True) -> tuple[tuple[str, ...], list[str]]:
    evs = ([Ev(SPIN, MAIN, 0, 2_000_000)] if lead else []) + list(work) + [Ev(FILL, MAIN, 2_100_000, 2_000)]
    kernels, unjoined, _ = _device_kernels(Prof(evs), ["relu_k"])
    return unjoined, [k.name for k in kernels]


def test_work_ordered_with_the_callers_stream_passes_and_the_harness_kernels_are_not_the_candidates() -> None:
    unjoined, names = rule(Ev("relu_k", MAIN, 2_000_100, 50_000), Ev("relu_k", SIDE, 2_000_200, 40_000))
    assert unjoined == ()
    assert names == ["relu_k", "relu_k"] and not any("spin" in n or "Fill" in n for n in names)


def test_work_that_started_beside_the_lead_spin_did_not_wait_for_the_caller() -> None:
    assert rule(Ev("relu_few", SIDE, 500_000, 100_000))[0] == ("relu_few",)
    assert rule(Ev("Memcpy DtoD (Device -> Device)", SIDE, 10_000, 5_000))[0] == ("Memcpy DtoD (Device -> Device)",)


def test_work_still_running_when_the_end_marker_starts_was_not_joined() -> None:
    assert rule(Ev("slow_relu_side", SIDE, 2_050_000, 100_000))[0] == ("slow_relu_side",)


def test_without_a_lead_only_the_end_is_judged() -> None:
    assert rule(Ev("relu_few", SIDE, 500_000, 100_000), lead=False)[0] == ()
    assert rule(Ev("slow_relu_side", SIDE, 2_050_000, 100_000), lead=False)[0] == ("slow_relu_side",)


def test_a_fill_launched_last_on_another_stream_is_not_taken_for_the_marker() -> None:
    """Red team 9's marker_hijack: a kernel named like torch's fill, launched on its side stream after its work, was
    the last fill, and its stream was taken for the caller's; the caller's stream is the lead spin's."""
    hijack = Ev("void FillFunctor_rt9(float*)", SIDE, 2_300_000, 1_000)
    unjoined, _ = rule(Ev("relu_side", SIDE, 2_050_000, 300_000), hijack)
    assert "relu_side" in unjoined
