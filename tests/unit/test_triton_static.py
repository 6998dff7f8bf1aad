"""A Triton candidate's path before it reaches a GPU: extraction from a messy reply, the static checks,
the default policy, the custom-kernel names, and Triton's own compiler (which runs without a GPU).

The GPU half (accepted, timed, JIT time in compile_s; its hacks rejected) is in tests/gpu/test_gpu_eval.py.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from kevolve.agent.extract import extract_code
from kevolve.contract import check_solution_source
from kevolve.sandbox.policy.source import custom_kernel_names, policy_reason

SOLUTIONS = Path(__file__).parent.parent / "gpu" / "solutions"
RELU = (SOLUTIONS / "relu_triton.py").read_text()
KERNEL_ONLY = RELU[RELU.index("@triton.jit"):RELU.index("class ModelNew")]


def replies(src: str) -> dict[str, str]:
    """The shapes models wrap one file in, from what extraction met in practice."""
    with_fence_in_docstring = src.replace('"""Honest ReLU', '"""Usage:\n```python\nm = ModelNew()\n```\nHonest ReLU')
    return {
        "kernel first, then the file, then usage": (
            "Let's write the kernel first:\n\n```python\n" + KERNEL_ONLY + "```\n\nNow the full module:\n\n"
            "```python\n" + src + "```\n\nUse it as:\n```python\nm = ModelNew().cuda()\ny = m(x)\n```\n"
            "This should be ~2x faster since it avoids an extra pass."),
        "reasoning with a draft, then the answer": (
            "<think>\nA first idea:\n```python\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
            "        return x.relu()\n```\nbut that calls PyTorch.\n</think>\n\n```python\n" + src + "```"),
        "four backticks around a docstring that holds three": (
            "````python\n" + with_fence_in_docstring + "````\n"),
        "indented inside a list item": (
            "1. The module:\n\n   ```py\n" + textwrap.indent(src, "   ") + "   ```\n2. Benchmark it."),
        "labelled triton, with a file name": "```triton model_new.py\n" + src + "```\n",
        "Python, tildes": "~~~Python\n" + src + "~~~\n",
    }


@pytest.mark.parametrize("shape", sorted(replies(RELU)))
def test_the_triton_file_is_extracted_from_a_messy_reply(shape: str) -> None:
    got = extract_code(replies(RELU)[shape])
    assert got.source is not None, got.reason
    assert "def relu_triton_k" in got.source and "class ModelNew" in got.source
    assert check_solution_source(got.source) is None


def test_a_triton_candidate_passes_the_static_checks_and_the_default_policy() -> None:
    assert check_solution_source(RELU) is None
    assert policy_reason(RELU) is None
    assert custom_kernel_names(RELU) == ("relu_triton_k",)


def test_triton_kernels_are_custom_however_triton_was_imported() -> None:
    src = textwrap.dedent('''
        import triton as tr
        from triton import jit as J
        import triton
        import triton.language as tl

        @tr.autotune(configs=[tr.Config({"BLOCK": 256})], key=["n"])
        # tuned over one config
        @tr.jit
        def tuned_k(x_ptr, n, BLOCK: tl.constexpr):
            pass

        @J
        def plain_k(x_ptr):
            pass

        @triton.heuristics({"EVEN": lambda a: a["n"] % 2 == 0})
        @triton.jit(do_not_specialize=["n"])
        def specialised_k(x_ptr, n, EVEN: tl.constexpr):
            pass

        def launcher(x):
            return x

        class ModelNew:
            pass
    ''')
    assert custom_kernel_names(src) == ("plain_k", "specialised_k", "tuned_k")
    assert policy_reason(src) is None


def test_triton_settings_and_ahead_of_time_compiles_are_refused_by_the_policy() -> None:
    knobs = RELU.replace("class ModelNew", "triton.knobs.runtime.interpret = True\n\n\nclass ModelNew")
    assert (policy_reason(knobs) or "").startswith("policy_monkeypatch: rebinds triton.knobs.runtime.interpret")
    aot = RELU.replace("class ModelNew", "_k = triton.compile('relu.ttir')\n\n\nclass ModelNew")
    assert (policy_reason(aot) or "").startswith("policy_files:")


def test_tritons_compiler_names_the_device_kernel_as_the_static_checks_do(tmp_path, monkeypatch) -> None:
    """The evaluator's custom-kernel evidence on a GPU is the profiler's kernel list: the name Triton
    gives the compiled kernel must be the one the static checks found, and count as custom."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget

    from kevolve.sandbox.common.profile import _is_custom

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    spec = importlib.util.spec_from_file_location("relu_triton_candidate", SOLUTIONS / "relu_triton.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines the kernel; nothing launches
    src = triton.compiler.ASTSource(fn=module.relu_triton_k, constexprs={"BLOCK": 1024},
                                    signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32))  # an H100, from a machine without one
    assert compiled.asm["cubin"] and f".entry {compiled.metadata.name}(" in compiled.asm["ptx"]
    names = custom_kernel_names(RELU)
    assert compiled.metadata.name in names and _is_custom(compiled.metadata.name, names)
