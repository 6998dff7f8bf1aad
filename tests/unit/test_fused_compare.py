"""The judge's one-pass comparison kernel in Triton's interpreter on the CPU (the cases: tests/fused_cases.py;
tests/gpu/test_fused_compare_gpu.py runs them compiled on the GPU)."""

import os

import pytest

pytest.importorskip("triton")

from fused_cases import cases, check  # noqa: E402


def test_the_fused_kernel_decides_as_the_torch_path_does() -> None:
    check(cases({**os.environ, "TRITON_INTERPRET": "1"}))


def test_off_the_gpu_and_when_switched_off_the_torch_path_runs(monkeypatch) -> None:
    import torch

    from kevolve.sandbox.judge import fused_compare

    x = torch.ones(8)
    assert fused_compare.stats(x, x) is None  # a CPU tensor
    monkeypatch.setenv("KEVOLVE_FUSED_COMPARE", "0")
    assert not fused_compare.enabled()
    # by default only outputs large enough to repay the kernel's build in each judge; =all: every size
    monkeypatch.setenv("KEVOLVE_FUSED_COMPARE", "1")
    assert fused_compare.enabled() and fused_compare.min_elements() == fused_compare.MIN_ELEMENTS == 1 << 28
    monkeypatch.setenv("KEVOLVE_FUSED_COMPARE", "all")
    assert fused_compare.enabled() and fused_compare.min_elements() == 0
