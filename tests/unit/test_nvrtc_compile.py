"""CUDA sources compile on the CPU machine through NVRTC (no GPU, no CUDA build of torch)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kevolve.sandbox.build.compile import nvrtc_compile

pytest.importorskip("cupy")
GPU_SOLUTIONS = Path(__file__).parent.parent / "gpu" / "solutions"


def _cuda_blocks(py_source: str) -> list[str]:
    """The raw CUDA strings of a CuPy candidate (r'''...''' literals holding __global__)."""
    return [b for b in re.findall(r"r'''(.*?)'''", py_source, re.S) if "__global__" in b]


@pytest.mark.parametrize("name", ["relu_cupy", "fused_chain_cupy", "relu_side_stream", "l2_persist"])
def test_cupy_candidate_kernels_compile_with_nvrtc(name: str) -> None:
    blocks = _cuda_blocks((GPU_SOLUTIONS / f"{name}.py").read_text())
    assert blocks
    for src in blocks:
        ok, log = nvrtc_compile(src, f"{name}.cu", arch="compute_90")
        assert ok, log


def test_nvrtc_reports_the_error_line_for_broken_source() -> None:
    ok, log = nvrtc_compile('extern "C" __global__ void k(float* x) { x[0] = undefined_name; }', "bad.cu")
    assert not ok
    assert "undefined_name" in log and "bad.cu" in log
