"""How a forward call's exception becomes a verdict (sandbox/runner/step.py `call`)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from kevolve.sandbox.common.harness import StageError
from kevolve.sandbox.runner.step import call


def _raising(exc: BaseException) -> nn.Module:
    class M(nn.Module):
        def forward(self, x):  # noqa: ANN001, ANN202
            raise exc

    return M()


def test_a_compilers_first_launch_error_is_a_compile_error_and_a_candidates_own_class_is_not() -> None:
    """The fourth red team's `class CompileException` read "compile_error: internal compiler error (build host)":
    the class is known by its name and by the package that defines it (CuPy, Triton)."""

    class CompileException(Exception):  # a candidate's own, defined in its module
        pass

    class Real(Exception):  # CuPy's, as its package defines it
        def get_message(self) -> str:
            return "kernel.cu(3): error: expected a ';'"

    Real.__name__ = Real.__qualname__ = "CompileException"
    Real.__module__ = "cupy.cuda.compiler"
    x = [torch.ones(2)]
    with pytest.raises(StageError) as own:
        call(_raising(CompileException("internal compiler error: out of memory (build host)")), x)
    assert own.value.status == "runtime_error" and "forward raised" in str(own.value)
    with pytest.raises(StageError) as real:
        call(_raising(Real("nvrtc failed")), x)
    assert real.value.status == "compile_error" and "(first launch)" in str(real.value)
