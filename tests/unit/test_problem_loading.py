"""Static validation of problem and candidate files."""

from __future__ import annotations

import pytest

from kevolve.kernelbench.problem import ProblemError, problem_from_source
from kevolve.sandbox.static_checks import check_candidate_source, custom_kernel_names


def test_problem_with_syntax_error_names_the_line() -> None:
    with pytest.raises(ProblemError, match=r"syntax error at line 2"):
        problem_from_source("import torch\ndef f(:\n", "p.py")


def test_problem_missing_names_lists_them() -> None:
    with pytest.raises(ProblemError, match="missing get_inputs, get_init_inputs"):
        problem_from_source("class Model: pass\n", "p.py")


def test_problem_id_is_content_hash_so_renames_keep_identity() -> None:
    src = "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
    a = problem_from_source(src, "a/level1/1_A.py")
    b = problem_from_source(src, "b/other_name.py")
    assert a.id == b.id and a.level == 1 and b.level is None


def test_candidate_without_modelnew_is_reported() -> None:
    assert "no ModelNew" in (check_candidate_source("class Model: pass\n") or "")
    assert check_candidate_source("class ModelNew: pass\n") is None


def test_custom_kernel_names_found_in_cuda_triton_cupy_and_cpp_sources() -> None:
    src = '''
cuda = """__global__ void __launch_bounds__(256) fused_gelu(float* x) {}
template <typename T> __global__ void tiled_mm_kernel(const T* a) {}"""
@triton.jit
def add_kernel(x_ptr): pass
k = cp.RawKernel(code, 'scale_rows')
ext = load_inline(name="e", cpp_sources=[s], functions=["relu_fwd", 'softmax_fwd'])
'''
    assert set(custom_kernel_names(src)) >= {"fused_gelu", "tiled_mm_kernel", "add_kernel", "scale_rows",
                                             "relu_fwd", "softmax_fwd"}
