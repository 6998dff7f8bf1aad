"""What gets embedded and keyword-indexed: kernel code kept, docstrings and boilerplate dropped."""

from __future__ import annotations

from kevolve.archive.text import condense, keyword_doc, kernel_text

SOLUTION = '''"""A fused ReLU written for kevolve's tests: this docstring is not the kernel."""
import torch
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // one element per thread
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
torch::Tensor relu_cuda(torch::Tensor x) { return x; }
"""
'''


def test_kernel_code_in_a_string_is_indexed_and_docstrings_are_not() -> None:
    text = kernel_text("relu", ("fusion",), SOLUTION)
    assert "__global__ void relu_kernel" in text and "fmaxf" in text
    assert "docstring" not in text and "one element per thread" not in text and "#include" not in text
    assert "relu_kernel" in keyword_doc("19_ReLU", "relu", "relu_fused", ("fusion",), SOLUTION)


def test_a_plain_docstring_is_still_dropped() -> None:
    assert condense('def f():\n    """Adds one."""\n    return 1\n') == "def f(): return 1"
