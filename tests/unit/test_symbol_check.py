"""The symbol check's rules on what real kernel extensions import (tests/fixtures/symbols/: `nm -D --undefined-only`
of modules the build recipe made): honest modules pass whole, each red-team wrapper's module is refused for the
capability it reaches, and what a CUDA extension's host stub imports is allowed (relu_inline_cuda: built by the recipe
on the H100, nvcc 13, g++ 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kevolve.sandbox.build.symbol_rules import entity, needed_refusal, refusal
from kevolve.sandbox.build.symbols import (
    check_module,
    parse_needed,
    parse_nm,
    refused_imports,
)

SYMBOLS = Path(__file__).parent.parent / "fixtures" / "symbols"
HONEST = sorted(p.stem for p in SYMBOLS.glob("*.nm") if not p.stem.startswith(("h2_", "static_runtime_")))
# red-team module -> the capability its first refused import gives
HACKS = {"h2_starts_thread_through_gthread": "threads", "h2_starts_thread_through_c10_pool": "threads",
         "h2_reads_file_through_torch_from_file": "files", "h2_reads_fd_through_stdio_filebuf": "files",
         "h2_reads_file_through_wifstream": "files", "h2_reads_file_through_wfilebuf": "files",
         "h2_reads_file_through_basic_file": "files"}


def test_the_fixtures_hold_every_honest_native_solution_and_every_hack() -> None:
    assert {"relu_cpp", "gelu_bias_cpp", "linear_relu_cpp", "softmax_cpp", "unusual_openmp", "relu_inline_cuda"} <= set(HONEST)
    assert {p.stem for p in SYMBOLS.glob("h2_*.nm")} == set(HACKS)


@pytest.mark.parametrize("name", HONEST)
def test_an_honest_extension_imports_nothing_the_check_refuses(name: str) -> None:
    count, refused = refused_imports((SYMBOLS / f"{name}.nm").read_text())
    assert count > 200 and refused == (), refused  # pybind11, ATen, libstdc++, libc: ~240 imports each


def test_the_openmp_control_keeps_its_fork_join_imports() -> None:
    names = {n for n, _ in parse_nm((SYMBOLS / "unusual_openmp.nm").read_text())}
    assert {"GOMP_parallel", "omp_get_num_threads", "omp_get_thread_num"} <= names


@pytest.mark.parametrize("name", sorted(HACKS))
def test_each_red_team_wrapper_is_refused_by_what_its_module_imports(name: str) -> None:
    _, refused = refused_imports((SYMBOLS / f"{name}.nm").read_text())
    assert refused and refused[0].why == HACKS[name], refused
    assert all(r.why != "not on the allowlist" for r in refused), refused  # each named for its capability


@pytest.mark.parametrize(("raw", "demangled", "why"), [
    ("open", "open", "files"), ("openat", "openat", "files"), ("fopen64", "fopen64", "files"),
    ("read", "read", "files"), ("mmap", "mmap", "memory mapping"), ("syscall", "syscall", "system call"),
    ("clone3", "clone3", "threads"), ("fork", "fork", "processes"), ("execve", "execve", "processes"),
    ("dlopen", "dlopen", "dynamic loading"), ("dl_iterate_phdr", "dl_iterate_phdr", "dynamic loading"),
    ("socket", "socket", "sockets"), ("getenv", "getenv", "environment"), ("sigaction", "sigaction", "signals"),
    ("omp_set_num_threads", "omp_set_num_threads", "process-wide setting"),
    ("PyImport_ImportModule", "PyImport_ImportModule", "embedded interpreter"),
    ("pthreadpool_create", "pthreadpool_create", "threads"),  # exported by libtorch_cpu, C-named
    ("mkl_serv_fopen", "mkl_serv_fopen", "not on the allowlist"),  # likewise: on no list, whatever it is called
    ("cudaLaunchHostFunc", "cudaLaunchHostFunc", "process-wide CUDA setting or driver lookup"),
    ("cuGetProcAddress_v2", "cuGetProcAddress_v2", "process-wide CUDA setting or driver lookup"),
    ("cudaDeviceSetLimit", "cudaDeviceSetLimit", "process-wide CUDA setting or driver lookup"),
    ("_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE",
     ("std::thread::_M_start_thread(std::unique_ptr<std::thread::_State, std::default_delete<std::thread::_State> >, "
      "void (*)())"), "threads"),
    ("_ZN3c1010ThreadPoolC2EiiSt8functionIFvvEE", "c10::ThreadPool::ThreadPool(int, int, std::function<void ()>)",
     "threads"),
    ("_ZN2at6launchESt8functionIFvvEE", "at::launch(std::function<void ()>)", "threads"),
    ("_ZNSt10filesystem6statusERKNS_7__cxx114pathE", "std::filesystem::status(std::filesystem::__cxx11::path const&)",
     "files"),
    ("_ZN2at15set_num_threadsEi", "at::set_num_threads(int)", "process-wide setting"),
    ("_ZN3c1010Dispatcher9singletonEv", "c10::Dispatcher::singleton()", "operator registration"),
    ("_ZN5torch3jit4loadERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
     "torch::jit::load(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)",
     "embedded interpreter"),
    ("_ZN3fmt2v114fileC1ENS0_17basic_cstring_viewIcEEi", "fmt::v11::file::file(fmt::v11::basic_cstring_view<char>, int)",
     "not on the allowlist"),  # another library's namespace: on no list
])
def test_a_capability_is_refused_by_name_whatever_library_exports_it(raw: str, demangled: str, why: str) -> None:
    assert refusal(raw, demangled) == why


@pytest.mark.parametrize("name", [
    # nvcc's host stub (crt/host_runtime.h) and the launch path of an ATen CUDA extension (not built here)
    "__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaUnregisterFatBinary", "__cudaRegisterFunction",
    "__cudaRegisterVar", "__cudaPushCallConfiguration", "__cudaPopCallConfiguration", "__cudaInitModule",
    "cudaLaunchKernel", "cudaGetLastError", "cudaGetErrorString", "cudaMemcpyAsync", "cudaMemsetAsync",
    "cudaStreamSynchronize", "cudaFuncSetAttribute", "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaGetDevice", "cudaDeviceGetAttribute", "cudaMalloc", "cudaFree", "cublasSgemm_v2", "cublasLtMatmul", "atexit",
    # the float forms GCC vectorises loops of math calls into (libmvec)
    "_ZGVdN8v_expf", "_ZGVbN2vv_pow", "expf", "__expf_finite", "tanhf", "erff", "GOMP_loop_nonmonotonic_dynamic_next",
])
def test_a_kernels_c_imports_are_allowed(name: str) -> None:
    assert refusal(name, name) == ""


@pytest.mark.parametrize("demangled", [
    "c10::cuda::getCurrentCUDAStream(signed char)",
    "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)",
    "at::cuda::getCurrentDeviceProperties()", "c10::cuda::ExchangeDevice(signed char)",  # CUDAGuard's
    "c10::cuda::SetDevice(signed char, bool)", "at::cuda::getCurrentCUDABlasHandle()",
    "at::internal::invoke_parallel(long, long, long, std::function<void (long, long)> const&)",  # joined
])
def test_the_cuda_and_parallel_apis_an_aten_kernel_calls_are_allowed(demangled: str) -> None:
    assert refusal("_Zx", demangled) == ""


@pytest.mark.parametrize(("demangled", "path"), [
    ("float* at::TensorBase::data_ptr<float>() const", "at::TensorBase::data_ptr"),
    ("vtable for std::bad_alloc", "std::bad_alloc"),
    (("std::basic_ostream<char, std::char_traits<char> >& std::operator<< <std::char_traits<char> >"
      "(std::basic_ostream<char, std::char_traits<char> >&, char const*)"), "std::operator@"),
    ("operator new(unsigned long)", "operator new"),
    ("std::__cxx11::basic_ostringstream<char, std::char_traits<char>, std::allocator<char> >::str() const &",
     "std::__cxx11::basic_ostringstream::str"),
])
def test_a_symbol_is_judged_by_the_name_it_is_about(demangled: str, path: str) -> None:
    assert entity(demangled) == path


def test_a_file_that_is_no_module_is_refused_not_passed(tmp_path: Path) -> None:
    bogus = tmp_path / "kx_bogus.so"
    bogus.write_bytes(b"not an ELF file")
    got = check_module(bogus)
    assert not got.ok and got.error and not got.infra
    assert got.reason("relu_ext").startswith("policy_native: the built extension 'relu_ext' could not be checked")


def test_a_module_carrying_its_own_cpp_runtime_is_refused_for_the_runtimes_file_and_system_calls() -> None:
    """The same CUDA ReLU linked by a compiler with only `libstdc++.a` (the H100's /opt/gcc, before the recipe named
    the shared runtime): the runtime's file streams are inside the module, so no C++ name of them is imported, but
    the C calls they make are, and are refused. `-static-libstdc++` in a candidate's flags ends the same way."""
    count, refused = refused_imports((SYMBOLS / "static_runtime_relu_inline_cuda.nm").read_text())
    assert count > 200 and not any(r.symbol.startswith("std::") for r in refused)
    assert {"files", "system call", "environment", "process-wide setting"} <= {r.why for r in refused}


@pytest.mark.parametrize("name", ["relu_cpp", "unusual_openmp", "relu_inline_cuda"])
def test_an_honest_extension_needs_only_the_libraries_torchs_recipe_links(name: str) -> None:
    libs = parse_needed((SYMBOLS / f"{name}.dyn").read_text())  # readelf -d -W of the same module
    assert {"libc10.so", "libtorch_cpu.so", "libstdc++.so.6", "libc.so.6"} <= set(libs)  # the C++ runtime shared
    assert [lib for lib in libs if needed_refusal(lib)] == []


@pytest.mark.parametrize(("library", "refused"), [
    ("libcudart.so.13", False), ("libc10_cuda.so", False), ("libtorch_cuda.so", False), ("libcublasLt.so.13", False),
    ("libgomp.so.1", False), ("libm.so.6", False),
    ("libcurl.so.4", True), ("libSegFault.so", True), ("libpython3.12.so.1.0", True), ("libshm.so", True),
    ("libtorch_cpu.so.evil", True),
])
def test_a_library_outside_the_recipe_and_the_cuda_toolkit_is_refused(library: str, refused: bool) -> None:
    # `-l<lib>` is an allowed flag: a library's constructors run when the module is loaded, before any import
    assert bool(needed_refusal(library)) is refused


def _fake_compiler(tmp_path: Path, found: dict[str, str]) -> str:
    """A compiler driver that answers `-print-file-name=NAME` as `found` says (the name itself when not found, as
    gcc does)."""
    cases = "".join(f'  "-print-file-name={name}") echo "{path}" ;;\n' for name, path in found.items())
    script = tmp_path / "fake-g++"
    script.write_text(f'#!/bin/sh\ncase "$1" in\n{cases}  -print-file-name=*) echo "${{1#-print-file-name=}}" ;;\nesac\n')
    script.chmod(0o755)
    return str(script)


def test_the_recipe_names_the_shared_cpp_runtime_only_where_the_compiler_has_no_libstdcxx_so(tmp_path: Path) -> None:
    from kevolve.sandbox.build.recipe import shared_stdcxx

    runtime = tmp_path / "libstdc++.so.6"
    runtime.write_bytes(b"\x7fELF")
    static_only = _fake_compiler(tmp_path, {"libstdc++.so.6": str(runtime)})  # no libstdc++.so: it would link the .a
    assert shared_stdcxx(static_only) == (str(runtime),)
    (tmp_path / "dev").mkdir()
    dev = tmp_path / "dev" / "libstdc++.so"
    dev.symlink_to(runtime)
    with_dev = _fake_compiler(tmp_path / "dev", {"libstdc++.so": str(dev), "libstdc++.so.6": str(runtime)})
    assert shared_stdcxx(with_dev) == ()
    assert shared_stdcxx(str(tmp_path / "no-such-compiler")) == ()


def test_the_link_line_puts_the_shared_runtime_before_the_libraries_that_need_it() -> None:
    from dataclasses import replace

    from kevolve.sandbox.build.extensions import ExtensionSpec
    from kevolve.sandbox.build.recipe import Toolchain, link_argv

    tc = replace(Toolchain.detect(), stdcxx=("/lib/x86_64-linux-gnu/libstdc++.so.6",))
    argv = link_argv(tc, ExtensionSpec(name="relu", cpp_sources=("int f();",)), "kx_relu")
    assert argv.index("/lib/x86_64-linux-gnu/libstdc++.so.6") < argv.index("-lc10") < argv.index("-o")
