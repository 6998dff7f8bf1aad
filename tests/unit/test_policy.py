"""The candidate policy's API, registry and rules (sandbox/policy/candidate.py): static, no candidate ever runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kevolve.sandbox.policy.candidate import CATEGORIES, UnknownCategory, check_policy, find_violations

DOCS = Path(__file__).parent.parent.parent / "docs" / "VERIFICATION.md"
HEAD = "import torch\nimport torch.nn as nn\n"


def reason(source: str, allow: frozenset[str] = frozenset()) -> str | None:
    v = check_policy(source, allow)
    return v.reason if v else None


def test_reason_is_one_line_naming_category_line_and_how_to_allow() -> None:
    r = reason(HEAD + "import threading\n")
    assert r == "policy_threads: import of threading at line 3 (pass --allow threads to permit)"


def test_allowing_a_category_reports_the_next_one_and_all_turns_the_policy_off() -> None:
    src = HEAD + "import os\nimport threading\nos.fork()\n"
    assert check_policy(src).category == "processes"  # type: ignore[union-attr]
    assert check_policy(src, frozenset({"processes"})).category == "threads"  # type: ignore[union-attr]
    assert check_policy(src, frozenset({"processes", "threads"})) is None
    assert check_policy(src, frozenset({"all"})) is None


def test_unknown_category_is_an_error_naming_the_choices() -> None:
    with pytest.raises(UnknownCategory, match="unknown policy category 'frames'.*introspection"):
        check_policy(HEAD, frozenset({"frames"}))


def test_syntax_errors_are_left_to_the_static_checks() -> None:
    assert find_violations("def broken(:\n") == []


def test_registry_has_a_code_description_and_checks_per_category_all_documented() -> None:
    docs = DOCS.read_text()
    assert set(CATEGORIES) == {"introspection", "monkeypatch", "process_setting", "environment", "network",
                               "processes", "threads", "files", "exit", "native", "import"}
    for name, cat in CATEGORIES.items():
        assert cat.code == f"policy_{name}" and cat.description and cat.checks
        assert f"`{cat.code}`" in docs, cat.code


def test_importing_the_policy_loads_no_torch() -> None:
    code = ("import sys\nfrom kevolve.sandbox.policy.candidate import check_policy\n"
            "check_policy(open(sys.argv[1]).read())\n"
            "print('HEAVY', [m for m in ('torch', 'numpy') if m in sys.modules])")
    src = Path(__file__).parent.parent / "fixtures" / "policy" / "llm_inline_cuda.py"
    out = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in out.stdout, out.stderr


def test_the_layer_classes_a_model_may_pass_around_are_torch_nn_layers() -> None:
    import torch.nn as nn

    from kevolve.sandbox.policy.tables import NN_LAYERS

    assert {"LayerNorm", "GELU", "Conv2d", "Linear"} <= NN_LAYERS and "Module" not in NN_LAYERS
    present = [getattr(nn, n) for n in NN_LAYERS if hasattr(nn, n)]
    assert len(present) >= 150 and all(isinstance(c, type) and issubclass(c, nn.Module) and c is not nn.Module
                                       for c in present)


def test_static_checks_and_config_carry_the_policy() -> None:
    from pydantic import ValidationError

    from kevolve.sandbox.config import SandboxConfig
    from kevolve.sandbox.policy.source import policy_reason

    assert policy_reason(HEAD + "import socket\n") == \
        "policy_network: import of socket at line 3 (pass --allow network to permit)"
    assert policy_reason(HEAD + "import socket\n", ("network",)) is None
    assert SandboxConfig(policy_allow=("files", "files")).policy_allow == ("files",)
    with pytest.raises(ValidationError, match="unknown policy category"):
        SandboxConfig(policy_allow=("sockets",))


def test_the_optimize_config_slice_carries_policy_allow(tmp_path) -> None:
    from kevolve.agent.settings import build_config

    cfg = build_config(llm="vllm:m", base_url="http://127.0.0.1:1/v1", env={}, device="cpu", runs_dir=tmp_path,
                       sandbox={"policy_allow": ("threads",)})
    assert cfg.sandbox.policy_allow == ("threads",)


@pytest.mark.parametrize("source", [
    HEAD + "import os\np = os.path.join(os.path.dirname(__file__), 'k.cu')\narch = os.environ.get('CUDA_HOME')\n",
    HEAD + "import os\nif 'TORCH_CUDA_ARCH_LIST' in os.environ:\n    a = os.environ['TORCH_CUDA_ARCH_LIST']\n",
    HEAD + "with torch.no_grad(), torch.cuda.device(0):\n    y = torch.zeros(1)\n",
    HEAD + "if torch.backends.cudnn.is_available() and torch.backends.cudnn.enabled:\n    pass\n",
    HEAD + "class M(nn.Module):\n    def f(self, n):\n        return getattr(self, n)\n",
    HEAD + "def f(m):\n    for p in ('weight', 'bias'):\n        getattr(m, p)\n",
    HEAD + "x = torch.ops.aten._softmax(torch.ones(2), 0, False)\n",
    HEAD + "t = torch.float32\nok = isinstance(t, torch.dtype) and type(t) is torch.dtype\n",
    HEAD + "class M(nn.Module):\n    def __init__(self):\n        nn.Module.__init__(self)\n"
           "        self.v = torch.__version__\n",
    HEAD + "if __name__ == '__main__':\n    print(nn.Module.__name__)\n",
    # own classes as values where the policy follows them: ResNet's _make_layer(block, …), an alias
    HEAD + "class Block(nn.Module):\n    expansion = 1\n\n    def __init__(self, n):\n"
           "        super(Block, self).__init__()\n\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
           "        super(ModelNew, self).__init__()\n        self.l = self._make(Block, 4)\n\n"
           "    def _make(self, block, n):\n        n = n * block.expansion\n"
           "        return nn.Sequential(*[block(n) for _ in range(2)])\n",
    HEAD + "class Fast(nn.Module):\n    pass\n\n\nModelNew = Fast\nok = isinstance(ModelNew(), (Fast, int))\n",
    HEAD + "class Fn(torch.autograd.Function):\n    pass\n\n\nif not hasattr(Fn, 'kernel'):\n    k = getattr(Fn, 'kernel', None)\n",
])
def test_honest_idioms_pass(source: str) -> None:
    assert reason(source) is None


SWIN = HEAD + ("class Merge(nn.Module):\n    def __init__(self, dim, norm_layer=None):\n        super().__init__()\n\n\n"
               "def build(make, dim, norm_layer=nn.LayerNorm):\n    return make(dim, norm_layer=norm_layer)\n\n\n")


@pytest.mark.parametrize("source", [
    # KernelBench L3 30 (Swin V2), which the policy refused in the offline proposer's own output (H100, 2026-11-27)
    SWIN + "m = build(Merge, 4)\n",  # a torch.nn layer class handed to a callee the policy cannot see (a parameter)
    SWIN + "m = build(Merge if 1 else None, 4)\n",  # one of its classes chosen by a condition, to its own function
    SWIN + "def f(k=None):\n    return 1\n\n\ny = f(k=Merge if 1 else None)\n",
    HEAD + "import collections.abc\nok = isinstance([], collections.abc.Iterable)\n",
    HEAD + "from collections.abc import Iterable, Mapping\nok = isinstance([], (Iterable, Mapping))\n",
    HEAD + "def f():\n    t = torch.arange(4.0)\n    t *= 8\n    t[0] = 1.0\n    return t\n",
    # KernelBench L3 48/49 (Mamba2) import einops themselves; a candidate may use its public functions and layers
    HEAD + "from einops import rearrange, repeat\ny = repeat(rearrange(torch.ones(2, 3), 'a b -> b a'), 'b a -> b a c', c=2)\n",
    HEAD + "import einops\nfrom einops.layers.torch import Rearrange\nm = nn.Sequential(Rearrange('a b -> b a'))\n"
           "y = einops.einsum(torch.ones(2, 3), torch.ones(3, 4), 'i j, j k -> i k')\n",
])
def test_what_real_models_write_passes(source: str) -> None:
    assert reason(source) is None


@pytest.mark.parametrize(("source", "category", "what"), [
    # the same positions with what the policy must still follow: foreign classes beyond torch.nn's layers, its own
    # classes where a foreign call or a container takes them, a method taken through a class a condition chose
    (SWIN + "m = build(Merge, 4, norm_layer=torch.cuda.Event)\n", "introspection", "torch.cuda.Event around as a value"),
    (SWIN + "m = build(Merge, 4, norm_layer=nn.Module)\n", "introspection", "torch.nn.Module around as a value"),
    (HEAD + "x = [nn.LayerNorm]\nx[0].forward = None\n", "monkeypatch", "assigns .forward"),
    (HEAD + "x = [nn.LayerNorm]\ny = x[0].__dict__\n", "introspection", "__dict__"),
    (SWIN + "y = print(Merge if 1 else None)\n", "monkeypatch", "hands its class Merge on as a value"),
    (SWIN + "y = [Merge or None]\n", "monkeypatch", "hands its class Merge on as a value"),
    (HEAD + "class A(nn.Module):\n    def forward(self, x):\n        self.y = x\n\n\n"
            "def g(k=None):\n    k.forward(3)\n\n\ny = g(k=A if 1 else None)\n", "monkeypatch", "through its class"),
    (HEAD + "import collections\nprint(collections.abc.sys)\n", "introspection", "collections.abc.sys around"),
    (HEAD + "import collections.abc as c\nx = c.sys.modules\n", "introspection", "sys.modules"),
    (HEAD + "def f(p):\n    t = p\n    t *= 8\n    t[0] = 1.0\n", "monkeypatch", "assigns an item of t"),
])
def test_what_those_allowances_still_refuse(source: str, category: str, what: str) -> None:
    v = check_policy(source)
    assert v is not None and v.category == category and what in v.detail, v


@pytest.mark.parametrize(("source", "category", "what"), [
    (HEAD + "torch.cuda.set_device(1)\n", "process_setting", "torch.cuda.set_device"),
    (HEAD + "torch.manual_seed(0)\n", "process_setting", "global RNG"),
    (HEAD + "m = torch.compile(nn.Linear(2, 2))\n", "process_setting", "torch.compile"),
    (HEAD + "import os\nfor k in os.environ:\n    pass\n", "environment", "whole environment"),
    (HEAD + "import os\nv = os.getenv('HF_TOKEN')\n", "environment", "HF_TOKEN"),
    (HEAD + "import os\nn = input()\nv = os.environ[n]\n", "environment", "named at run time"),
    (HEAD + "x = torch._C._get_tracing_state()\n", "import", "private"),
    (HEAD + "import einopsx\n", "import", "allowlist"),
    # the fourth red team: Triton's host-code builder (gcc on any C, then imported) and numpy.ma.mrecords's file reader
    (HEAD + "from triton.runtime.build import compile_module_from_src\n", "native", "triton.runtime.build"),
    (HEAD + "import triton\nm = triton.runtime.build.compile_module_from_src('int x;', 'm')\n", "native", "builds"),
    (HEAD + "from triton.backends.nvidia import driver\nm = driver.compile_module_from_src('int x;', 'm')\n",
     "native", "compile_module_from_src"),
    (HEAD + "import numpy.ma.mrecords as mr\nf = mr.openfile('/etc/passwd')\n", "files", "openfile"),
    (HEAD + "import numpy.ma.mrecords as mr\nf = mr.fromtextfile('/etc/passwd')\n", "files", "fromtextfile"),
    # einops by its members only: its tests package holds pytest (importorskip imports anything) and pickle
    (HEAD + "import einops.tests.test_einsum as t\nt.pytest.importorskip('ctypes')\n", "import", "allowlist"),
    (HEAD + "import einops\neinops.tests.test_einsum.pytest.importorskip('ctypes')\n", "import", "allowed members"),
    (HEAD + "from einops import tests\n", "import", "einops.tests"),
    (HEAD + "import einops\nf = einops.einops.functools\n", "import", "allowed members"),
    (HEAD + "from einops import rearrange\nx = rearrange.__globals__\n", "introspection", "__globals__"),
    (HEAD + "import einops\neinops.rearrange = None\n", "monkeypatch", "einops.rearrange"),
    (HEAD + "class M(nn.Module):\n    def f(self, x):\n        return x.__class__\n", "introspection", "__class__"),
    (HEAD + "def f(cls, fn):\n    cls.forward = fn\n", "monkeypatch", "did not create"),
    (HEAD + "import warnings\nwarnings.filters.clear()\n", "monkeypatch", "warnings.filters"),
    (HEAD + "torch.save({}, 'x.pt')\n", "files", "torch.save"),
    (HEAD + "import numpy as np\nnp.zeros(3).tofile('x')\n", "files", "tofile"),
    (HEAD + "print(torch)\n", "introspection", "as a value"),
])
def test_each_rule_names_what_it_caught(source: str, category: str, what: str) -> None:
    v = check_policy(source)
    assert v is not None and v.category == category and what in v.detail, v


def native(cpp: str, **kw: str) -> str:
    extra = "".join(f", {k}={v}" for k, v in kw.items())
    return (HEAD + "from torch.utils.cpp_extension import load_inline\n"
            f"SRC = r'''\n{cpp}\n'''\next = load_inline(name='ext', cpp_sources=SRC, functions=['f']{extra})\n")


@pytest.mark.parametrize("cpp", [
    '// never call dlopen(), system() or PyEval_GetFrame() here\ntorch::Tensor f(torch::Tensor x) { return x; }',
    '/* syscall(SYS_getpid); fopen("/proc/self/maps") */\ntorch::Tensor f(torch::Tensor x) { return x; }',
    'torch::Tensor f(torch::Tensor x) { TORCH_CHECK(x.defined(), "no fopen(), getenv() or /etc/ here"); return x; }',
    '__device__ float g(float a) { float r; asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 '
    '{%0}, {%1}, {%2}, {%0};" : "+f"(r) : "r"(1), "r"(2)); return r; }\ntorch::Tensor f(torch::Tensor x) { return x; }',
    '__device__ float g(float a) { float r; asm volatile("{\\n\\t.reg .pred p;\\n\\tsetp.gt.f32 p, %1, 0f00000000;\\n\\t'
    '@p mov.f32 %0, %1;\\n\\t@!p mov.f32 %0, 0f00000000;\\n}" : "=f"(r) : "f"(a)); return r; }\n'
    '__device__ void h() { asm volatile(".local .align 4 .b8 buf[16];"); }\ntorch::Tensor f(torch::Tensor x) { return x; }',
    'torch::Tensor f(torch::Tensor x) { cudaEvent_t e; cudaEventCreate(&e); cudaEventRecord(e); '
    'cudaError_t err = cudaGetLastError(); auto y = x.clone(); auto c = std::bind(std::plus<int>(), 1, 2); '
    'long n = 1\'000\'000; return y; }',
    'TORCH_LIBRARY(myops, m) { m.def("f(Tensor x) -> Tensor"); }\n'
    'TORCH_LIBRARY_IMPL(myops, CPU, m) { m.impl("f", f); }',
    '__device__ float g(float signal, bool open, bool truncate) { float y = signal; if (open) y += 1; '
    'return truncate ? floorf(y) : y; }\ntorch::Tensor f(torch::Tensor x) { return x; }',
])
def test_honest_native_code_passes(cpp: str) -> None:
    assert reason(native(cpp)) is None


@pytest.mark.parametrize(("cpp", "what"), [
    ('void f() { PyRun_SimpleString("import os"); }', "CPython C API"),
    ('#include <Python.h>\nvoid f() {}', "embedded interpreter"),
    ('void f(py::object o) { o.attr("x"); }', "pybind11"),
    ('#include <dlfcn.h>\nvoid f() { dlsym(RTLD_DEFAULT, "cudaEventRecord"); }', "dynamic loading"),
    ('void f() { asm volatile("mov $60, %rax; syscall"); }', "host assembly"),
    # red team 5 (a11): a raw syscall's bytes as assembler data directives
    ('void f() { asm volatile(".uleb128 0x0f; .uleb128 0x05"); }', "host assembly (.uleb128"),
    ('void f() { asm volatile(".sleb128 15\n\t.sleb128 5"); }', "host assembly (.sleb128"),
    ('void f() { asm volatile(".single 1.0e-40"); }', "host assembly (.single"),
    # escapes the compiler decodes, literal by literal, then joined (2026-11-28: these passed the scan)
    ('void f() { asm volatile("\\x2e" "byte 0x0f, 0x05"); }', "host assembly (.byte"),
    ('void f() { asm volatile("sys\\x63" "all"); }', "host assembly (syscall"),
    ('void f() { asm volatile("\\056uleb128 0x0f"); }', "host assembly (.uleb128"),
    # an allow list for what opens a statement with a dot: only PTX's declarations
    ('void f() { asm volatile("x: .cfi_escape 0x0f"); }', "assembler directive in asm (.cfi_escape"),
    ('void f() { asm volatile("nop\\n\\t.set magic, 0x0f05"); }', "assembler directive in asm (.set"),
    ('void f() { std::thread t([]{}); t.detach(); }', "threads"),
    ('extern "C" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) { return cudaSuccess; }',
     "interposition"),
    ('#define cudaEventRecord(e) cudaSuccess\nvoid f() {}', "redefines"),
    ('void f() { cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20); }', "L2 persistence"),
    ('TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl("relu", f); }', "another operator namespace"),
    ('__attribute__((constructor)) static void boot() {}', "load-time constructor"),
    ('#include "/etc/passwd"', "outside the toolkit headers"),
    ('void f() { at::globalContext().setAllowTF32CuBLAS(true); }', "process-wide torch setting"),
    ('auto a = 1\'0; PyEval_GetFrame(); auto b = 2\'0;', "CPython C API"),  # digit separators are not quotes
    ('#define S(x) x\nauto s = FOOR"(" S(PyEval_GetFrame()) ")";', "CPython C API"),  # not a raw string
])
def test_native_rules_see_through_comments_and_literals_as_the_compiler_does(cpp: str, what: str) -> None:
    v = check_policy(native(cpp))
    assert v is not None and v.category == "native" and what in v.detail, v


def test_native_finding_points_at_its_line_inside_the_kernel_source() -> None:
    src = native("torch::Tensor f(torch::Tensor x) {\n  return x;\n}\nvoid g() { system(\"id\"); }")
    v = check_policy(src)
    assert v is not None and v.line == src.splitlines().index('void g() { system("id"); }') + 1


def test_kernel_sources_built_from_constants_are_static_and_runtime_ones_are_not() -> None:
    static = (HEAD + "from torch.utils.cpp_extension import load_inline\nB = 256\n"
              "HDR = '#include <torch/extension.h>'\n"
              "class M(nn.Module):\n    body = f'// block {B}\\nvoid f() {{}}'\n    def __init__(self):\n"
              "        super().__init__()\n        src = '\\n'.join([HDR, self.body]).replace('f()', 'g()')\n"
              "        self.ext = load_inline(name='e', cpp_sources=src, functions=['g'])\n")
    assert reason(static) is None
    dynamic = static.replace("B = 256", "B = input()")
    assert "kernel source not statically known" in reason(dynamic)  # type: ignore[operator]
    rebound = static + "def poke():\n    other = M()\n    other.body = input()\n"  # any store of .body counts
    assert "not statically known" in reason(rebound)  # type: ignore[operator]


@pytest.mark.parametrize(("flags", "ok"), [
    ("extra_cuda_cflags=['-O3', '--use_fast_math', '-lineinfo', '-arch=sm_90']", True),
    ("extra_ldflags=['-lcublas']", True),
    ("extra_ldflags=['-Wl,--wrap=cudaEventElapsedTime']", False),
    ("extra_cflags=['-fplugin=/tmp/x.so']", False),
    ("extra_cuda_cflags=['-ccbin', '/tmp/cc']", False),
    ("extra_cflags=['-DGRAB=PyEval_GetFrame']", False),
    ("build_directory='/tmp/b'", False),
])
def test_compiler_flags_and_build_paths(flags: str, ok: bool) -> None:
    src = native("torch::Tensor f(torch::Tensor x) { return x; }")
    src = src.replace("functions=['f']", f"functions=['f'], {flags}")
    assert (reason(src) is None) == ok, reason(src)


def test_extension_names_are_static_identifiers_but_may_be_numbered() -> None:
    base = native("torch::Tensor f(torch::Tensor x) { return x; }")
    assert reason(base.replace("name='ext'", "name=f'ext_{os.getpid()}'").replace(HEAD, HEAD + "import os\n")) is None
    injected = base.replace("name='ext'", "name='x -fplugin=y'")
    assert "not a static identifier" in reason(injected)  # type: ignore[operator]
    assert "named like the module" in reason(base.replace("name='ext'", "name='torch'"))  # type: ignore[operator]


def test_every_finding_of_a_broken_source_is_listed_in_priority_order() -> None:
    src = HEAD + "import json\nimport os\nos._exit(0)\nopen('r.json', 'w')\n"
    assert [v.category for v in find_violations(src)] == ["files", "exit", "import"]
    assert re.match(r"policy_files: uses open at line 6", reason(src) or "")


def test_a_property_or_getattribute_makes_self_attributes_unknown() -> None:
    src = (HEAD + "from torch.utils.cpp_extension import load_inline\n\n\n"
           "class K(nn.Module):\n    SRC = 'void f() {}'\n\n"
           "    def build(self):\n        return load_inline(name='e', cpp_sources=self.SRC, functions=['f'])\n")
    assert reason(src) is None
    shadowed = src + "\n\nclass L(K):\n    @property\n    def SRC(self):\n        return input()\n"
    assert "not statically known" in reason(shadowed)  # type: ignore[operator]
    hooked = src + "\n\nclass M(K):\n    def __getattribute__(self, name):\n        return input()\n"
    assert "not statically known" in "\n".join(v.detail for v in find_violations(hooked))
    assert "defines __getattribute__" in reason(hooked)  # type: ignore[operator]  # itself a denied hook


def test_modules_that_torch_and_numpy_hold_are_followed_by_their_own_names() -> None:
    """Allowed packages hold the modules they import (torch.os, torch.utils.cpp_extension.subprocess);
    the policy re-checks a chain from any component that names a standard-library module, which only
    works if none is held under another public name (as enum holds builtins as `bltns`)."""
    import importlib
    import types

    held = []
    for holder in ("torch", "torch.nn", "torch.nn.functional", "torch.cuda", "torch.utils", "torch.backends",
                   "torch.utils.cpp_extension", "torch.autograd", "torch.jit", "torch.library", "torch.cuda.memory",
                   "torch.linalg", "torch.fft", "torch.special", "numpy", "numpy.linalg", "numpy.random"):
        for name, value in vars(importlib.import_module(holder)).items():
            top = getattr(value, "__name__", "").split(".")[0]
            if isinstance(value, types.ModuleType) and top in sys.stdlib_module_names and not name.startswith("_"):
                held.append((holder, name, value.__name__))
    assert held, "torch holds stdlib modules (torch.os …): the check below would test nothing"
    assert [h for h in held if h[1] not in sys.stdlib_module_names] == []


@pytest.mark.parametrize("body", [
    # item stores into what the candidate made
    "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.cache = {}\n\n"
    "    def forward(self, x):\n        self.cache[x.shape] = x\n        return x\n",
    "def f(x):\n    out = torch.empty(3, 4)\n    out[:, 0] = 1\n    y = x.clone()\n    y[0] += 2\n    return out, y\n",
    "_CACHE = {}\n\n\ndef get(k):\n    _CACHE[k] = 1\n    return _CACHE[k]\n",
    # str.format on templates the policy can read, fields that are names or positions
    "KERNEL = 'void f_{n}() {{ }}'\nSRC = KERNEL.format(n=3)\ns = '{} {:>4} {x!r}'.format(1, 2, x=3)\n"
    "t = f'{s!r:>9}'\n",
    # allowed dunder methods, with statements, methods called through their class on self
    "class A:\n    def __call__(self):\n        return 1\n\n    def __repr__(self):\n        return 'A'\n\n"
    "    def __enter__(self):\n        return self\n\n    def __exit__(self, *a):\n        return None\n",
    "def f(x):\n    with torch.no_grad():\n        return x * 2\n",
    "class B(nn.Module):\n    def forward(self, x):\n        return x\n\n\nclass C(B):\n"
    "    def forward(self, x):\n        return B.forward(self, x) + 1\n",
    "class K:\n    @staticmethod\n    def grid(n):\n        return (n + 255) // 256\n\n\ng = K.grid(1000)\n",
    "class K:\n    def __init__(self):\n        self._x = 1\n\n    @property\n    def x(self):\n"
    "        return self._x\n\n"
    "    @x.setter\n    def x(self, v):\n        self._x = v\n",
    # a method wrapped by torch keeps its self; a local bound to call results takes item stores
    "class M(nn.Module):\n    @torch.autocast('cpu', enabled=False)\n    def forward(self, x):\n"
    "        self.seen = True\n        y = torch.zeros_like(x)\n        y = self.helper(x)\n"
    "        y[:, 0] += 1\n        return y\n\n    def helper(self, x):\n        return x.clone()\n",
    # an autograd Function's static forward/backward: their first parameter is ctx
    "class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x, s):\n        ctx.s = s\n"
    "        ctx.save_for_backward(x)\n        return x * s\n\n    @staticmethod\n    def backward(ctx, g):\n"
    "        return g * ctx.s, None\n\n\ny = Fn.apply(torch.ones(1), 2.0)\n",
    # class patterns with plain attributes, a fresh numpy generator
    "def f(p):\n    match p:\n        case complex(real=r):\n            return r\n    return 0\n",
    "import numpy as np\nr = np.random.default_rng(0)\nv = r.standard_normal(3)\n",
])
def test_honest_code_near_the_attribute_item_and_hook_rules_passes(body: str) -> None:
    assert reason(HEAD + body) is None


@pytest.mark.parametrize(("cpp", "kw"), [
    ("using namespace torch::indexing;\nnamespace F = torch::nn::functional;\n"
     "torch::Tensor f(torch::Tensor x) { return x.index({Slice()}); }", {}),
    ("using namespace std;\ntorch::Tensor f(torch::Tensor x) { vector<int> v; return x.clone(); }", {}),
    ('__device__ float g(float a) { float r; asm volatile("{ .reg .b32 t; mov.b32 t, %1; mov.b32 %0, t; }" '
     ': "=f"(r) : "f"(a)); return r; }\ntorch::Tensor f(torch::Tensor x) { return x; }', {}),
    ("torch::Tensor f(torch::Tensor x) { return x; }",
     {"extra_include_paths": "['include']", "extra_cflags": "['-O3', '-Iinclude']"}),
])
def test_honest_native_code_near_the_alias_asm_and_include_rules_passes(cpp: str, kw: dict[str, str]) -> None:
    assert reason(native(cpp, **kw)) is None


@pytest.mark.parametrize(("source", "what"), [
    # red team 5: numpy.testing's measure/runstring/rundocs exec() a string in the caller's namespace (then sys,
    # gc, ctypes and frames are free); run_threaded starts a thread pool; torch.testing._internal runs processes
    ("import numpy as np\nnp.testing.measure('import sys')\n", "numpy.testing.measure"),
    ("import numpy\nnumpy.testing.runstring('import gc', {})\n", "numpy.testing.runstring"),
    ("from numpy.testing import run_threaded\n", "numpy.testing"),
    ("import numpy.testing as t\nt.rundocs()\n", "numpy.testing"),
    ("from numpy import testing\ntesting.tempdir()\n", "numpy.testing"),
    ("import torch\nx = torch.testing._internal.common_utils\n", "torch.testing._internal"),
])
def test_numpy_and_torch_test_helpers_that_run_strings_or_threads_are_refused(source: str, what: str) -> None:
    v = check_policy(source)
    assert v is not None and v.category == "introspection" and what in v.detail, v


def test_torch_testings_comparisons_stay_allowed() -> None:
    assert check_policy("import torch\ntorch.testing.assert_close(torch.ones(1), torch.ones(1))\n") is None
