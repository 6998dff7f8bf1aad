"""Static validation of problem and candidate files."""

from __future__ import annotations

import pytest

from kevolve.agent.extract import extract_code
from kevolve.contract import ProblemError, check_solution_source, defines_model_new, problem_from_source
from kevolve.sandbox.policy.source import custom_kernel_names


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
    assert "no ModelNew" in (check_solution_source("class Model: pass\n") or "")
    assert check_solution_source("class ModelNew: pass\n") is None


SOLUTIONS = {
    "class": "class ModelNew: pass\n",
    "alias": "class _Impl: pass\nModelNew = _Impl\n",
    "tuple_assignment": "ModelNew, helper = object, 1\n",
    "nested_only": "def f():\n    class ModelNew: pass\n",
    "usage_only": "m = ModelNew()\n",
    "other_class": "class Model: pass\n",
}


@pytest.mark.parametrize("name", sorted(SOLUTIONS))
def test_extractor_and_sandbox_agree_on_what_defines_model_new(name: str) -> None:
    src = SOLUTIONS[name]
    accepted = check_solution_source(src) is None
    assert accepted == defines_model_new(src) == (name in {"class", "alias", "tuple_assignment"})
    assert (extract_code(f"```python\n{src}```").source is not None) == accepted


def test_source_cut_off_mid_block_defines_model_new_by_its_class_line() -> None:
    assert defines_model_new("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self,")
    assert not defines_model_new("import torch\nx = ModelNew(")


def test_old_kernelbench_problem_path_reexports_the_contract() -> None:
    from kevolve import contract
    from kevolve.kernelbench import problem

    assert problem.load_problem is contract.load_problem and problem.ProblemError is contract.ProblemError


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
