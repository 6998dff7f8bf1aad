"""The compiled comparison kernel on the GPU decides as the torch path does (the cases of
tests/unit/test_fused_compare.py, on CUDA tensors)."""

import os

import pytest

from fused_cases import cases, check

pytestmark = pytest.mark.gpu


def test_the_compiled_kernel_decides_as_the_torch_path_does() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    check(cases({**env, "CASE_DEVICE": "cuda"}))
