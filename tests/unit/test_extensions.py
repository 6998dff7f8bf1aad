"""Reading a candidate's load_inline extensions without running it, and keying them by content."""

from __future__ import annotations

import pytest
from testpaths import FIXTURES

from kevolve.sandbox.build.extensions import ExtensionSpec, extract
from kevolve.sandbox.build.recipe import BuildTarget

TARGET = BuildTarget(torch="2.13.0", cuda="13.0", python="cpython-311", arch="9.0")
CPP = "torch::Tensor f(torch::Tensor x) { return x; }"


def test_extracts_keyword_literals_from_a_fixture_solution() -> None:
    got = extract((FIXTURES / "solutions" / "relu_cpp.py").read_text())
    assert got.unknown == ()
    (spec,) = got.specs
    assert spec.name == "relu_ext"
    assert spec.functions == (("relu_fwd", "relu_fwd"),)
    assert "relu_fwd(torch::Tensor x)" in spec.cpp_sources[0]
    assert not spec.uses_cuda


@pytest.mark.parametrize("head, call", [
    ("from torch.utils.cpp_extension import load_inline as li", "li('e', [SRC], functions=['f'])"),
    ("from torch.utils import cpp_extension as ce", "ce.load_inline(name='e', cpp_sources=SRC, functions='f')"),
    ("import torch.utils.cpp_extension", "torch.utils.cpp_extension.load_inline('e', SRC, None, None, ['f'])"),
    ("import torch.utils.cpp_extension as cx", "cx.load_inline('e', cpp_sources=[SRC], functions={'f': 'f'})"),
    ("from torch.utils.cpp_extension import *", "load_inline('e', (SRC,), functions=('f',))"),
])
def test_finds_load_inline_under_any_import_alias_and_argument_style(head: str, call: str) -> None:
    src = f"import torch\n{head}\nSRC = {CPP!r}\next = {call}\n"
    (spec,) = extract(src).specs
    assert (spec.name, spec.cpp_sources, spec.functions) == ("e", (CPP,), (("f", "f"),))


def test_evaluates_concatenation_fstrings_format_percent_join_and_dedent() -> None:
    src = '''
import textwrap
from torch.utils.cpp_extension import load_inline
BLOCK = 256
HEAD = "#include <torch/extension.h>\\n"
BODY = textwrap.dedent("""
    constexpr int kBlock = {b};
""").format(b=BLOCK)
TAIL = f"// block {BLOCK}\\n" + "int g() { return %d; }" % (BLOCK,)
cuda = "\\n".join([HEAD, BODY, TAIL])
ext = load_inline(name="k_" + "ext", cpp_sources=HEAD + "int h();", cuda_sources=[cuda],
                  extra_cuda_cflags=["-O3", f"-DBLOCK={BLOCK}"], functions=["g"])
'''
    (spec,) = extract(src).specs
    assert spec.name == "k_ext"
    assert spec.cuda_sources == ("#include <torch/extension.h>\n\n\nconstexpr int kBlock = 256;\n\n"
                                 "// block 256\nint g() { return 256; }",)
    assert spec.extra_cuda_cflags == ("-O3", "-DBLOCK=256")
    assert spec.uses_cuda


@pytest.mark.parametrize("body", [
    "SRC = open('k.cpp').read()\next = load_inline('e', SRC)",  # read from a file at run time
    "SRC = 'a'\nSRC = SRC + 'b'\next = load_inline('e', SRC)",  # bound twice
    "def make():\n    return 'x'\next = load_inline('e', make())",  # computed by candidate code
    "kw = dict(name='e', cpp_sources='x')\next = load_inline(**kw)",  # **kwargs
    "ext = load_inline('e', '{:{}}'.format('x', 10**9))",  # a format that would only allocate memory
    "ext = load_inline('e', ['x'] * 3)",  # an operator the evaluator does not run
])
def test_calls_that_need_the_candidate_to_run_are_not_static(body: str) -> None:
    got = extract(f"from torch.utils.cpp_extension import load_inline\n{body}\n")
    assert got.specs == ()
    assert len(got.unknown) == 1


def test_file_based_load_and_syntax_errors_are_reported_not_raised() -> None:
    assert "file-based" in extract("from torch.utils.cpp_extension import load\nm = load('m', ['a.cpp'])\n").unknown[0]
    assert extract("def broken(:\n").unknown[0].startswith("syntax")


def test_key_ignores_the_name_and_changes_with_anything_built() -> None:
    a = ExtensionSpec(name="a", cpp_sources=(CPP,), functions=(("f", "f"),))
    assert a.key(TARGET) == a.model_copy(update={"name": "b"}).key(TARGET)
    assert a.key(TARGET) == ExtensionSpec(name="a", cpp_sources=(CPP,), functions=(("f", "f"),)).key(TARGET)
    changed = [a.model_copy(update=u) for u in ({"cpp_sources": (CPP + " ",)}, {"functions": (("f", "doc"),)},
                                                {"extra_cflags": ("-O3",)}, {"with_pytorch_error_handling": False})]
    assert len({a.key(TARGET), *(c.key(TARGET) for c in changed)}) == 5
    assert a.key(TARGET) != a.key(TARGET.model_copy(update={"torch": "2.14.0"}))


def test_architecture_is_part_of_the_key_only_for_cuda_extensions() -> None:
    other = TARGET.model_copy(update={"arch": "8.0"})
    cpp = ExtensionSpec(name="a", cpp_sources=(CPP,))
    cu = cpp.model_copy(update={"cuda_sources": ("__global__ void k() {}",)})
    assert cpp.key(TARGET) == cpp.key(other)
    assert cu.key(TARGET) != cu.key(other)


def test_runtime_call_and_static_reading_give_the_same_key() -> None:
    src = f"from torch.utils.cpp_extension import load_inline as li\nS = {CPP!r}\nm = li('e', [S], functions=['f'], verbose=True)\n"
    (static,) = extract(src).specs
    runtime = ExtensionSpec.from_call(("other_name", [CPP]), {"functions": ["f"], "build_directory": "/x"})
    assert static.key(TARGET) == runtime.key(TARGET)


def test_flags_that_could_run_programs_or_read_files_are_left_to_the_worker() -> None:
    ok = ExtensionSpec(name="a", cpp_sources=(CPP,), extra_cflags=("-O3", "-std=c++17", "-DN=4"),
                       extra_cuda_cflags=("--use_fast_math", "-Xptxas=-v", "-arch=sm_90a", "-Xcompiler=-O3,-fopenmp"), extra_ldflags=("-lcublas",))
    assert ok.unsafe_reason() == ""
    for bad in ({"extra_cflags": ("-fplugin=/tmp/p.so",)}, {"extra_cflags": ("-wrapper", "sh,-c,id")},
                {"extra_ldflags": ("-Wl,--format=binary",)}, {"extra_cflags": ("@/etc/shadow",)},
                {"extra_include_paths": ("/root",)}, {"extra_cflags": ("-include/etc/passwd",)},
                {"extra_cuda_cflags": ("-Xcompiler=-O3,-fplugin=/tmp/p.so",)}, {"extra_cuda_cflags": ("-ccbin=/tmp/x",)}):
        assert ok.model_copy(update=bad).unsafe_reason(), bad


def test_flags_are_split_as_torchs_ninja_line_splits_them() -> None:
    spec = ExtensionSpec.from_call(("e", [CPP]), {"extra_cflags": ["", " -O3  --use_fast_math ", "-DMSG='a b'"],
                                                   "extra_ldflags": [""], "extra_cuda_cflags": "-Xcompiler -fopenmp"})
    assert spec.extra_cflags == ("-O3", "--use_fast_math", "-DMSG=a b")
    assert spec.extra_ldflags == ()
    assert spec.extra_cuda_cflags == ("-Xcompiler", "-fopenmp")
    assert spec.key(TARGET) == ExtensionSpec.from_call(("e", [CPP]), {}).model_copy(
        update={"extra_cflags": ("-O3", "--use_fast_math", "-DMSG=a b"), "extra_cuda_cflags": ("-Xcompiler", "-fopenmp")}).key(TARGET)
    assert ExtensionSpec.from_call(("e", [CPP]), {"extra_cflags": [""], "extra_ldflags": [""]}).unsafe_reason() == ""
    for bad in ("-Xcompiler -fplugin=/tmp/p.so", "-O3 -wrapper sh,-c,id", "-O3 @/etc/shadow"):
        assert ExtensionSpec.from_call(("e", [CPP]), {"extra_cuda_cflags": [bad]}).unsafe_reason(), bad
    try:
        ExtensionSpec.from_call(("e", [CPP]), {"extra_cflags": ["-DX='open"]})
    except ValueError as e:
        assert "extra_cflags" in str(e)
    else:
        raise AssertionError("an unbalanced quote must be refused")
