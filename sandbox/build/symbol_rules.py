"""What a built kernel extension may import: the rules of the symbol check (sandbox/build/symbols.py).

Whatever wrapper a candidate's C++ writes around a file read, a thread or a process (`std::wifstream`,
`__gnu_cxx::stdio_filebuf`, `__gthread_create`, `c10::TaskThreadPool` …), the module the linker makes must
import, as an undefined dynamic symbol, the library function that does it: the libraries a module is linked
against (libc, libstdc++, libm, libgomp, libtorch, libcudart) are the only code that can open a file or start a
thread for it without a system call of its own (inline `syscall` is the text scan's: policy/native.py).

So every imported symbol must be on one of these lists:
- C names (libc, libm, libgcc, libgomp, the Python C API pybind11 needs, the CUDA runtime and its libraries):
  an allowlist of names or of name families that are finite by construction (`GOMP_loop_*`, `cublas*`). What is
  not on it is refused, whatever it is called: `open`, `pthread_create`, `dlopen`, but also `mkl_serv_fopen`
  or `pthreadpool_create`, which libtorch_cpu happens to export.
- C++ names of the standard library: an allowlist of families (strings, string streams, ostreams for messages,
  exceptions, hashing, the C++ ABI). No file streams (`basic_filebuf`, `basic_[io]fstream`, `__basic_file`),
  no `std::thread`, no `std::filesystem`: they are not on it.
- C++ names of libtorch (at::, c10::, torch::, caffe2::, and the pybind11 type casters libtorch_python
  defines): by namespace, less the families below. libtorch exports tens of thousands of functions and a kernel
  may call any operator (`at::_ops::<op>::call`), so an allowlist of names would refuse honest kernels at every
  release; the capabilities inside libtorch are few and named here instead (files, threads, dynamic loading,
  process-wide settings, operator registration, TorchScript, the environment).
"""

from __future__ import annotations

import re


# ---- C names -----------------------------------------------------------------------------------------------
def _alternatives(*parts: str) -> str:
    return "|".join(parts)


def _words(text: str) -> list[str]:
    return text.split()


_LIBC = frozenset(_words("""
memcpy memmove memset memcmp memchr memrchr rawmemchr strlen strnlen strcmp strncmp strchr strrchr strstr strdup
strndup strcpy strncpy strcat strncat strspn strcspn strpbrk strtok strtok_r strerror strerror_r __xpg_strerror_r
strtol strtoul strtoll strtoull strtod strtof strtold atoi atol atoll atof __isoc99_sscanf __isoc99_vsscanf
__isoc23_strtol __isoc23_strtoul __isoc23_strtoll __isoc23_strtoull __isoc23_sscanf __isoc23_vsscanf sscanf
snprintf sprintf vsnprintf vsprintf printf vprintf fprintf vfprintf puts fputs fputc putc putchar fwrite fflush
stdout stderr __snprintf_chk __sprintf_chk __vsnprintf_chk __vsprintf_chk __fprintf_chk __printf_chk
__vfprintf_chk __memcpy_chk __memmove_chk __memset_chk __strcpy_chk __strncpy_chk __strcat_chk __strncat_chk
__stack_chk_fail malloc calloc realloc free aligned_alloc posix_memalign memalign
abort __assert_fail __errno_location __cxa_atexit __cxa_finalize atexit __tls_get_addr __libc_single_threaded
__gmon_start__ _ITM_registerTMCloneTable _ITM_deregisterTMCloneTable __gxx_personality_v0 __gcc_personality_v0
__dynamic_cast __ctype_b_loc __ctype_tolower_loc __ctype_toupper_loc toupper tolower
qsort bsearch rand rand_r srand abs labs llabs div ldiv clock clock_gettime time gettimeofday sched_yield
pthread_once pthread_key_create pthread_key_delete pthread_getspecific pthread_setspecific pthread_self
pthread_equal __pthread_key_create __once_proxy
"""))
# `__pthread_key_create` is the weak reference by which libstdc++ asks whether threads exist (gthr-posix.h, glibc
# before 2.34); `__once_proxy` is std::call_once's. `abort` and `atexit` stay: GCC's noexcept cleanups call std::terminate (abort: a crash, never a clean exit), and
# nvcc's registration stub unregisters the module's fat binary with atexit.
_C_FAMILIES = re.compile(_alternatives(
    r"__cxa_\w+|_Unwind_\w+",  # the C++ ABI and the unwinder (libstdc++, libgcc_s)
    r"pthread_(?:mutex|mutexattr|cond|condattr|rwlock|rwlockattr|spin)_\w+",  # locks: no thread is started by one
    # libgcc's arithmetic helpers
    (r"__(?:popcount|clz|ctz|ffs|parity|bswap)[sdt]i2|__u?(?:div|mod)[sdt]i3|__mul[sdt]i3|__(?:fix|float)\w+|"
     r"__(?:extend|trunc)\w+2|__powi[sdxt]f2|__(?:mul|div)[sdxt]c3"),
    # OpenMP's fork-join constructs (libgomp): every thread of a region has joined when the construct returns;
    # not the setters (omp_set_num_threads …) nor offloading (GOMP_target*)
    (r"GOMP_(?:parallel\w*|barrier\w*|critical_\w+|atomic_(?:start|end)|loop_\w+|single_\w+|sections\w*|"
     r"ordered_\w+|task|taskwait\w*|taskyield|taskgroup_\w+|taskloop\w*|reduction_\w+|workshare_\w+|doacross_\w+|"
     r"teams\w*|cancel\w*|alloc|free|error|warning)"),
    r"omp_(?:get_\w+|in_parallel|in_final|is_initial_device|(?:init|destroy|set|unset|test)_(?:nest_)?lock\w*)",
))
_MATH = _words("acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 exp10 expm1 log log2 log10 "
         "log1p logb ilogb pow sqrt cbrt hypot erf erfc tgamma lgamma lgamma_r gamma ceil floor trunc round lround "
         "llround rint lrint llrint nearbyint fmod remainder remquo fabs fmin fmax fdim fma copysign nan nextafter "
         "nexttoward frexp ldexp modf scalbn scalbln sincos significand j0 j1 jn y0 y1 yn")
# libm, with its float/long double/_Float128 forms, the old `__exp_finite` aliases and libmvec's vector forms
# (`_ZGVdN8v_expf`, which GCC emits when it vectorises a loop of calls)
_LIBM = re.compile(rf"(?:__)?(?:{_alternatives(*_MATH)})(?:f|l|f128|f64|f32|f64x)?(?:_finite)?|"
                   r"_ZGV[bcdeA-Z]N\d+[vlu\d]+_\w+|__(?:isnan|isinf|finite|fpclassify|signbit|issignaling)(?:f|l)?")
# The Python C API that pybind11 and torch's bindings import (argument casts, errors, the GIL, module set-up).
# What a module could reach *through* these (PyEval_GetBuiltins, PyObject_GetAttrString) is the text scan's to
# refuse (pybind11 access to Python objects): every pybind11 module imports them.
_PYTHON = re.compile(
    r"Py(?:Object|Type|Long|Float|Bool|Complex|Unicode|Bytes|ByteArray|Tuple|List|Dict|Set|FrozenSet|Sequence|"
    r"Number|Iter|Slice|MemoryView|Buffer|Capsule|Err|Exc|GILState|ThreadState|InstanceMethod|CFunction|CMethod|"
    r"Method|Mem|Weakref|Property|BaseObject|Frame|Exception|Index|Callable|StaticMethod|ClassMethod|Arg|Vectorcall|"
    r"Ellipsis|Gen|Cell|Super|DictProxy|Mapping)_\w+|"
    r"PyModuleDef_Init|PyModule_(?:Type|New\w*|Create2|AddObject\w*|AddIntConstant|GetDict|GetName\w*|Check\w*)|"
    r"PyThread_tss_\w+|PyInterpreterState_(?:GetDict|Get|Main|GetID)|"
    r"PyEval_(?:SaveThread|RestoreThread|AcquireThread|ReleaseThread|GetBuiltins|InitThreads|ThreadsInitialized)|"
    r"Py_(?:GetVersion|IncRef|DecRef|XIncRef|XDecRef|IsInitialized|IsFinalizing|None|True|False|IsNone|Is|"
    r"NewRef|XNewRef|EnterRecursiveCall|LeaveRecursiveCall|BuildValue\w*)|"
    r"_Py_(?:Dealloc|IncRef|DecRef|IsFinalizing|CheckFunctionResult|NegativeRefcount|RefTotal|BuildValue\w*|"
    r"IncRefShared|DecRefShared\w*|MergeZeroLocalRefcount|\w+Struct|EllipsisObject)|"
    r"_Py(?:Object|Long|Unicode|Arg|Err|Dict|Tuple|List|Type|ThreadState|Bytes|Float)_\w+|"
    r"PyMutex_\w+|PyCriticalSection\w*")  # versions differ in these (3.12's vectorcall, 3.13's free threading)
# The CUDA runtime's registration and launch entry points (nvcc's host stub), the runtime and driver API, and
# the CUDA libraries a kernel may link (-lcublas …). The process-wide setters, host callbacks (a thread of the
# runtime running the candidate's code) and entry-point lookups (any driver function by name) are refused.
_CUDA = re.compile(r"__cuda(?:RegisterFatBinary|RegisterFatBinaryEnd|UnregisterFatBinary|RegisterFunction|"
                   r"RegisterVar|RegisterManagedVar|RegisterTexture|RegisterSurface|PushCallConfiguration|"
                   r"PopCallConfiguration|InitModule|RegisterLinkedBinary\w*|GetKernel|LaunchKernel)|"
                   r"cuda[A-Z]\w*|cu[A-Z]\w*|cublas\w*|cublasLt\w*|curand\w*|cufft\w*|cusparse\w*|cusolver\w*|"
                   r"cudnn\w*|nvtx\w+")
_CUDA_DENIED = re.compile(r"cu(?:da)?(?:DeviceSetLimit|CtxSetLimit|SetDevice|DeviceReset|SetDeviceFlags|"
                          r"DeviceSetCacheConfig|CtxSetCacheConfig|DeviceSetSharedMemConfig|CtxSetSharedMemConfig|"
                          r"ProfilerStart|ProfilerStop|HostRegister|CtxSetCurrent|CtxPushCurrent|CtxPopCurrent|"
                          r"CtxCreate\w*|CtxDestroy\w*|DevicePrimaryCtxReset\w*|DevicePrimaryCtxSetFlags\w*|ThreadExit|"
                          r"DeviceSetMemPool|DeviceSetGraphMemAttribute|CtxResetPersistingL2Cache|LaunchHostFunc|"
                          r"StreamAddCallback|GetProcAddress\w*|GetDriverEntryPoint\w*|GetExportTable|Ipc\w+|"
                          r"LibraryLoadFromFile|ModuleLoad)|cublasSetMathMode|cublasSetAtomicsMode")

# ---- C++ names ---------------------------------------------------------------------------------------------
_STD = re.compile(r"std::(?:__cxx11::)?(?:" + _alternatives(
    r"__throw_\w+", r"(?:basic_)?string(?:::.*)?", r"basic_(?:o|i)?stringstream(?:::.*)?", r"(?:o|i)?stringstream(?:::.*)?",
    # input streams read only the buffer they are given: string buffers here, file buffers are CAPABILITIES below
    r"basic_stringbuf(?:::.*)?", r"(?:basic_)?ostream(?:::.*)?", r"(?:basic_)?i(?:o)?stream(?:::.*)?", r"basic_ios(?:::.*)?", r"ios_base(?:::.*)?",
    r"basic_streambuf(?:::.*)?", r"locale(?:::.*)?", r"ctype(?:::.*)?", r"num_put(?:::.*)?", r"numpunct(?:::.*)?",
    r"__ostream_insert", r"ios_base_library_init", r"operator@", r"endl", r"flush", r"getline", r"ws", r"c(?:out|err|log)",
    r"(?:runtime|logic|range|overflow|underflow|domain|length)_error(?:::.*)?", r"out_of_range(?:::.*)?",
    r"invalid_argument(?:::.*)?", r"bad_\w+(?:::.*)?", r"(?:nested_)?exception(?:::.*)?", r"system_error(?:::.*)?",
    r"_V2::(?:generic|system)_category", r"_V2::error_category(?:::.*)?", r"error_code(?:::.*)?",
    r"__exception_ptr(?:::.*)?", r"current_exception", r"rethrow_exception", r"terminate", r"uncaught_exceptions?",
    r"_Hash_bytes", r"_Fnv_hash_bytes", r"__detail::_Prime_rehash_policy(?:::.*)?", r"_Rb_tree_\w+",
    r"(?:__detail::)?_List_node_base(?:::.*)?", r"chrono::_V2::(?:steady|system)_clock::now", r"type_info(?:::.*)?",
    r"__once_call(?:able)?", r"allocator(?:::.*)?", r"nothrow", r"align_val_t",
) + r")")
_OTHER_CXX = re.compile(r"__cxxabiv1::.*|__gnu_cxx::(?:__verbose_terminate_handler|__throw_\w+|__snprintf_lite)|"
                        r"operator (?:new|delete)(?:\[\])?")
_TORCH = re.compile(r"(?:at|c10|torch|caffe2)::.*|pybind11::detail::type_caster::.*")

# ---- capabilities, named (also to say why a C name off the lists is refused) -------------------------------------
CAPABILITIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((what, re.compile(p)) for what, p in (
    ("files", (r"^(?:f?open|open64|openat\w*|fopen64|freopen\w*|fdopen|creat\w*|opendir|fdopendir|readdir\w*|"
              r"read|pread\w*|readv|preadv\w*|fread\w*|fgets|fgetc|getc|getline|getdelim|fscanf|__isoc\d+_fscanf|"
              r"write|pwrite\w*|writev|unlink\w*|rename\w*|mkdir\w*|rmdir|stat\w*|lstat\w*|fstat\w*|__x?stat\w*|"
              r"access|faccessat|realpath|readlink\w*|symlink\w*|link\w*|truncate\w*|ftruncate\w*|mkstemp\w*|"
              r"mkdtemp|tmpfile\w*|tmpnam|sendfile\w*|splice|copy_file_range|__open\w*|__libc_open\w*|"
              r"name_to_handle_at|open_by_handle_at|inotify\w*|fanotify\w*|chmod|fchmod\w*|chown|fchown\w*|"
              r"mkfifo\w*|mknod\w*)$|"
              r"__basic_file|basic_filebuf|basic_[io]?fstream|\b[io]?fstream\b|\bw?filebuf\b|stdio_(?:sync_)?filebuf|"
              r"std::(?:__cxx11::)?(?:__)?filesystem|from_file|MapAllocator|caffe2::serialize|torch::serialize|"
              r"FileAdapter|c10::(?:try_)?make_temp|c10::TempFile|c10::TempDir|torch::data::")),
    ("threads", (r"^(?:pthread_(?:create|attr_\w+|detach|join|tryjoin_np|timedjoin_np|kill|cancel|sigqueue|"
                r"setaffinity_np|setschedparam|setname_np)|thrd_\w+|clone\d*|__clone\w*|__gthread_\w+|"
                r"PyThread_start_new_thread\w*)$|"
                r"std::(?:thread|jthread)\b|std::__future_base|std::__basic_future|std::async\b|boost::thread|"
                r"c10::(?:Task)?ThreadPool|c10::TaskThreadPoolBase|c10::ThreadPoolRegistry|caffe2::(?:P)?ThreadPool|"
                r"at::(?:launch|intraop_launch\w*|internal::launch\w*|get_thread_pool|PTThreadPool)\b|"
                r"^pthreadpool_\w+")),
    ("processes", (r"^(?:fork|vfork|_Fork|exec[lv]\w*|fexecve|execveat|system|popen|pclose|posix_spawn\w*|daemon|"
                  r"setsid|setpgid|kill|killpg|tgkill|ptrace|process_vm_\w+|wait|waitpid|wait3|wait4|waitid|"
                  r"exit|_exit|_Exit|quick_exit|Py_Exit|Py_FinalizeEx|Py_Finalize)$")),
    ("dynamic loading", (r"^(?:dl(?:open|mopen|sym|vsym|info|addr|error|close|iterate_phdr|_iterate_phdr)\w*|"
                        r"_dl_\w+|__libc_dl\w*)$|at::DynamicLibrary|c10::DynamicLibrary")),
    ("system call", (r"^(?:syscall|__syscall\w*|ioctl|prctl|arch_prctl|seccomp|bpf|perf_event_open|"
                    r"userfaultfd|io_uring\w*)$")),
    ("memory mapping", (r"^(?:mmap\w*|munmap|mprotect|pkey_\w+|mremap|madvise|shm_open|shm_unlink|shmget|shmat|"
                       r"memfd_create|process_madvise)$")),
    ("sockets", (r"^(?:socket\w*|connect|bind|listen|accept\d?|send\w*|recv\w*|getaddrinfo|gethostbyname\w*|"
                r"getsockopt|setsockopt|getpeername|getsockname)$|^curl_\w+")),
    ("environment", (r"^(?:getenv|secure_getenv|__secure_getenv|setenv|putenv|unsetenv|clearenv|environ|__environ|"
                    r"_environ)$|c10::utils::(?:get|set|has|check)_env")),
    ("signals", (r"^(?:signal|sigaction|__sysv_signal|bsd_signal|sigprocmask|pthread_sigmask|raise|sigqueue|alarm|"
                r"setitimer|timer_create|signalfd)$")),
    ("process-wide setting", (r"^(?:setrlimit\w*|prlimit\w*|sched_set\w+|setpriority|nice|umask|chdir|fchdir|chroot|"
                             r"set\w*[ug]id|setgroups|personality|ioprio_set|setlocale|uselocale|omp_set_\w+|"
                             r"mkl_set\w+|MKL_Set\w+|openblas_set\w+|PySys_\w+)$|"
                             r"at::(?:set_num_threads|set_num_interop_threads|globalContext|manual_seed)\b|"
                             r"at::Context::set|c10::Set(?:CPU)?Allocator|setCurrentCUDAStream|c10::cuda::set_device\b|"
                             r"CUDACachingAllocator::set\w*|c10::impl::tls_set_dispatch_key|"
                             r"c10::impl::_force_tls_local_dispatch_key_set")),
    ("operator registration", (r"c10::Dispatcher|c10::RegisterOperators|torch::Library|c10::impl::OperatorEntry|"
                              r"torch::detail::TorchLibraryInit|c10::OperatorHandle::set")),
    ("embedded interpreter", (r"^(?:PyImport_\w+|PyRun_\w+|Py_Compile\w*|PyEval_Eval\w*|PyEval_Set\w+|PyMarshal_\w+|"
                             r"PyCode_\w+|PyFunction_\w+|Py_Initialize\w*|Py_Main|Py_RunMain|PyOS_\w+|PyFile_\w+|"
                             r"Py_NewInterpreter\w*|PyUnstable_\w+|PyThreadState_SetAsyncExc|PyErr_SetInterrupt\w*)$|torch::jit::|torch::python::|torch::deploy::|"
                             r"torch::autograd::python::|^THP\w+")),
))


# The libraries a module may need (DT_NEEDED): what torch's recipe links (sandbox/build/recipe.py: c10, torch_cpu,
# torch, torch_python, and c10_cuda, torch_cuda, cudart for CUDA), the toolchain's runtime, and the CUDA libraries a
# kernel may add with -l. Any other library's constructors would run when the module is loaded (the flags allow
# `-l<lib>`), before any symbol of it is called.
_NEEDED = re.compile(r"lib(?:c10\w*|torch\w*|stdc\+\+|gcc_s|c|m|mvec|gomp|pthread|dl|rt|"
                     r"cudart|cuda|cublas|cublasLt|cudnn\w*|curand|cufft\w*|cusparse\w*|cusolver\w*|nvrtc\w*|"
                     r"nvToolsExt|nvJitLink)\.so(?:\.\d+)*|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1")


def needed_refusal(library: str) -> str:
    """Why a module may not need this shared library ('' when it may)."""
    return "" if _NEEDED.fullmatch(library) else "a library kernel extensions do not link"


def capability(demangled: str) -> str:
    """The capability a symbol gives by name ('' when it names none of them)."""
    return next((what for what, pattern in CAPABILITIES if pattern.search(demangled)), "")


_QUALIFIER = re.compile(r"^(?:vtable|typeinfo name|typeinfo|VTT|construction vtable|guard variable|"
                        r"TLS init function|TLS wrapper function|non-virtual thunk to|virtual thunk to|"
                        r"covariant return thunk to)\s+(?:for\s+)?")
_OPERATOR = re.compile(r"operator(?:<<=|>>=|<=>|<<|>>|<=|>=|->\*|->|<|>|\(\)|\[\])\s*")


def entity(demangled: str) -> str:
    """The qualified name a demangled symbol is about, template arguments, parameters and return type dropped:
    `float* at::TensorBase::data_ptr<float>() const` is `at::TensorBase::data_ptr`, `vtable for
    std::bad_alloc` is `std::bad_alloc`, `std::operator<< <…>(…)` is `std::operator@`."""
    s = _QUALIFIER.sub("", demangled).strip()
    s = _OPERATOR.sub("operator@", s)
    angle = paren = 0
    out: list[str] = []
    for ch in s:
        if ch == "<":
            angle += 1
        elif ch == ">":
            angle -= 1
        elif ch == "(" and angle == 0:
            if paren == 0 and out and not "".join(out).endswith(("(anonymous namespace", "operator")):
                break  # the parameter list
            paren += 1
        elif ch == ")" and angle == 0:
            paren -= 1
        elif angle == 0:
            out.append(ch)
    head = "".join(out).strip()
    return head.rsplit(" ", 1)[-1] if " " in head and not head.startswith("operator ") else head


def refusal(raw: str, demangled: str) -> str:
    """Why a module may not import this symbol ('' when it may): the capability it names, or that it is on no
    list of what kernel extensions import. `raw` is the symbol as the module names it (no version), `demangled`
    its C++ spelling (the same text for a C name)."""
    what = capability(demangled) or capability(raw)
    if what:
        return what
    name = raw
    if not name.startswith("_Z") or _LIBM.fullmatch(name):  # a C name, or one of libmvec's vector names
        if name in _LIBC or _C_FAMILIES.fullmatch(name) or _LIBM.fullmatch(name) or _PYTHON.fullmatch(name):
            return ""
        if _CUDA.fullmatch(name):
            return "process-wide CUDA setting or driver lookup" if _CUDA_DENIED.fullmatch(name) else ""
        return "not on the allowlist"
    if name.startswith("_Z") and demangled == raw:
        return "not on the allowlist"  # a C++ name the demangler could not read
    path = entity(demangled)
    if "::" not in path and _QUALIFIER.match(demangled):
        return ""  # the type information of a built-in type (`typeinfo for bool`)
    if _STD.fullmatch(path) or _OTHER_CXX.fullmatch(path) or _TORCH.fullmatch(path):
        return ""
    return "not on the allowlist"


__all__ = ["CAPABILITIES", "capability", "entity", "needed_refusal", "refusal"]
