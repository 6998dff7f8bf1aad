"""The candidate policy's tables: which modules, members, names and attributes belong to which category.

Plain data, read by `policy_python` (Python rules) and documented in docs/VERIFICATION.md. A chain is
a dotted name after imports and aliases are resolved (`nn.functional.relu` -> `torch.nn.functional.relu`);
the longest table entry that is a prefix of it decides. `ALLOW` marks an allowed prefix.
"""

from __future__ import annotations

from kevolve.languages import LANGUAGES, kernel_modules

ALLOW = "allow"

# Top-level modules a candidate may import; anything else is `import` unless MODULES names it.
# torch, numpy and every kernel language's modules (kevolve/languages.py) are allowed with deny-listed parts
# (MEMBERS); the stdlib ones are checked member by member against their public, non-module API
# (policy_python.stdlib_api).
HEAVY = ("torch", "numpy", *kernel_modules())
STDLIB = ("math", "cmath", "functools", "itertools", "operator", "typing", "dataclasses", "collections",
          "enum", "abc", "numbers", "warnings", "string", "re", "copy", "hashlib", "bisect", "heapq",
          "textwrap", "contextlib", "time", "__future__")
# `os` is allowed for os.path, reading named environment variables and a few constants (MEMBERS).
PARTIAL = ("os", "sys")
# Small tensor libraries that problems themselves import (KernelBench L3 48/49: einops), allowed by name: each module
# here lists the members a candidate may use; nothing else under the package (einops.tests holds pytest and pickle).
LIBRARIES: dict[str, frozenset[str]] = {
    "einops": frozenset(("rearrange", "reduce", "repeat", "einsum", "pack", "unpack", "parse_shape", "asnumpy",
                         "EinopsError", "layers")),
    "einops.layers": frozenset(("torch",)),
    "einops.layers.torch": frozenset(("Rearrange", "Reduce", "EinMix")),
}

# Denied modules (and submodules of allowed packages) by category. Importing one is a violation.
MODULES: dict[str, str] = {
    **dict.fromkeys(("inspect", "gc", "ctypes", "_ctypes", "cffi", "builtins", "importlib", "imp", "pkgutil",
                     "zipimport", "runpy", "types", "marshal", "pickle", "_pickle", "dill", "cloudpickle",
                     "copyreg", "shelve", "code", "codeop", "traceback", "linecache", "dis", "tracemalloc",
                     "faulthandler", "trace", "pdb", "bdb", "profile", "cProfile", "pstats", "site", "sysconfig",
                     "torch.profiler", "torch.autograd.profiler", "torch.fx", "torch.cuda.profiler",
                     "numpy.ctypeslib",
                     "torch.utils.cpp_backtrace", "torch.monitor",
                     # run Python given as strings (Timer(stmt=…) exec()s it) or compile TorchScript source;
                     # numpy.testing's measure/runstring/rundocs exec() strings, run_threaded starts threads (red
                     # team 5), torch.testing._internal runs processes: test helpers, never a kernel's
                     "torch.utils.benchmark", "torch.utils.jit", "torch.jit.frontend", "numpy.testing",
                     "torch.testing._internal"), "introspection"),
    **dict.fromkeys(("torch.library", "torch.overrides", "torch.utils.flop_counter", "torch.utils.module_tracker"),
                    "monkeypatch"),
    **dict.fromkeys(("torch.compiler", "torch.export", "torch.cuda.tunable", "torch.cuda.green_contexts",
                     "torch.numa", "torch.utils.deterministic", "torch.utils.backend_registration"),
                    "process_setting"),
    **dict.fromkeys(("threading", "_thread", "concurrent", "asyncio", "multiprocessing", "torch.multiprocessing",
                     "torch.utils.data", "torch.utils.throughput_benchmark"), "threads"),
    **dict.fromkeys(("subprocess", "pty", "signal", "pipes", "posix", "nt", "resource", "fcntl", "termios", "tty",
                     "pydoc", "webbrowser", "numpy.f2py", "numpy.distutils", "torch.utils.collect_env"),
                    "processes"),
    "atexit": "exit",
    **dict.fromkeys(("io", "_io", "pathlib", "shutil", "tempfile", "glob", "fileinput", "zipfile", "tarfile",
                     "gzip", "bz2", "lzma", "sqlite3", "dbm", "mmap", "filecmp", "torch.serialization",
                     "torch.utils.tensorboard", "torch.utils.show_pickle", "torch.utils.file_baton",
                     "torch.utils.hipify", "torch.utils.model_dump", "torch.cuda.gds", "torch.onnx",
                     "numpy.lib.format", "numpy.lib.npyio"), "files"),
    **dict.fromkeys(("socket", "_socket", "ssl", "urllib", "http", "requests", "httpx", "aiohttp", "urllib3",
                     "ftplib", "smtplib", "poplib", "imaplib", "telnetlib", "xmlrpc", "socketserver", "selectors",
                     "websocket", "websockets", "paramiko", "torch.hub", "torch.distributed",
                     "torch.utils.model_zoo", "torch.cuda.nccl"), "network"),
    **dict.fromkeys(("kevolve", "kevolve_problem", "kevolve_candidate", "torch.package"), "import"),
    **{m: c for lang in LANGUAGES.values() for m, c in lang.denied_modules.items()},
}

# Members of allowed modules, by longest matching prefix (a call, a read or a store of the chain).
MEMBERS: dict[str, str] = {
    # sys: all of it is introspection, except exiting
    "sys": "introspection", "sys.exit": "exit",
    # os: deny by default (import), with the dangerous parts named
    "os": "import", **dict.fromkeys(("os.path", "os.sep", "os.pathsep", "os.linesep", "os.name", "os.curdir",
                                     "os.pardir", "os.extsep", "os.cpu_count", "os.getpid", "os.fspath",
                                     "os.PathLike", "os.urandom"), ALLOW),
    "os.path.expandvars": "environment",  # substitutes any $NAME, credentials included
    **{f"os.{n}": "processes" for n in (
        "system", "popen", "fork", "forkpty", "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp",
        "execvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
        "posix_spawn", "posix_spawnp", "kill", "killpg", "setsid", "setpgid", "setpgrp", "wait", "waitpid",
        "wait3", "wait4", "waitid", "nice", "register_at_fork", "pidfd_open", "startfile", "plock")},
    "os._exit": "exit", "os.abort": "exit",
    **{f"os.{n}": "files" for n in (
        "open", "fdopen", "remove", "unlink", "rename", "renames", "replace", "mkdir", "makedirs", "rmdir",
        "removedirs", "listdir", "scandir", "walk", "fwalk", "stat", "lstat", "chmod", "chown", "lchown", "link",
        "symlink", "readlink", "truncate", "ftruncate", "write", "read", "pread", "pwrite", "close", "dup", "dup2",
        "lseek", "chdir", "fchdir", "chroot", "mkfifo", "mknod", "access", "utime", "sendfile", "memfd_create",
        "statvfs", "getcwd", "getcwdb", "pipe", "pipe2", "copy_file_range", "posix_fallocate", "sync")},
    **{f"os.{n}": "environment" for n in ("putenv", "unsetenv", "environb", "getenvb")},
    # torch
    "torch.compile": "process_setting", "torch.cuda.cudart": "introspection",
    "torch.cuda.memory.change_current_allocator": "process_setting",
    "torch.cuda.memory.CUDAPluggableAllocator": "process_setting",
    "torch.jit.enable_onednn_fusion": "process_setting", "torch.jit.fork": "threads", "torch.jit.wait": "threads",
    "torch.jit.save": "files", "torch.jit.load": "files",
    "torch.save": "files", "torch.load": "files",
    "torch.utils.cpp_extension": "files",
    "torch.jit.CompilationUnit": "introspection",  # TorchScript compiled from a string
    "torch.ops.import_module": "import", "torch.ops.load_library": "files",  # importlib / dlopen by name
    **dict.fromkeys((f"torch.utils.cpp_extension.{n}" for n in (
        "load_inline", "CUDA_HOME", "ROCM_HOME", "CUDNN_HOME", "IS_HIP_EXTENSION", "include_paths",
        "library_paths", "is_ninja_available")), ALLOW),
    # numpy
    "numpy.lib.stride_tricks.as_strided": "introspection",  # unchecked strides: any host address
    **{f"numpy.{n}": "process_setting" for n in ("seterr", "seterrcall", "setbufsize")},
    # the kernel languages' own rules
    **{m: c for lang in LANGUAGES.values() for m, c in lang.members.items()},
}

# torch.nn's layer classes (Module subclasses of torch.nn.modules.__all__ in torch 2.13, less Module, the deprecated
# Container and SyncBatchNorm): what a model may hand around as a value (`norm_layer=nn.LayerNorm`). Static, since the
# policy loads no torch; tests/unit/test_policy.py checks each is a Module subclass of the installed torch.
NN_LAYERS = frozenset((
    "AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveLogSoftmaxWithLoss AdaptiveMaxPool1d "
    "AdaptiveMaxPool2d AdaptiveMaxPool3d AlphaDropout AvgPool1d AvgPool2d AvgPool3d BCELoss "
    "BCEWithLogitsLoss BatchNorm1d BatchNorm2d BatchNorm3d Bilinear CELU CTCLoss ChannelShuffle "
    "CircularPad1d CircularPad2d CircularPad3d ConstantPad1d ConstantPad2d ConstantPad3d Conv1d Conv2d "
    "Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d CosineEmbeddingLoss CosineSimilarity "
    "CrossEntropyLoss CrossMapLRN2d Dropout Dropout1d Dropout2d Dropout3d ELU Embedding EmbeddingBag "
    "FeatureAlphaDropout Flatten Fold FractionalMaxPool2d FractionalMaxPool3d GELU GLU GRU GRUCell "
    "GaussianNLLLoss GroupNorm Hardshrink Hardsigmoid Hardswish Hardtanh HingeEmbeddingLoss HuberLoss "
    "Identity InstanceNorm1d InstanceNorm2d InstanceNorm3d KLDivLoss L1Loss LPPool1d LPPool2d LPPool3d LSTM "
    "LSTMCell LayerNorm LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d LazyConv1d LazyConv2d LazyConv3d "
    "LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d LazyInstanceNorm1d LazyInstanceNorm2d "
    "LazyInstanceNorm3d LazyLinear LeakyReLU Linear LinearCrossEntropyLoss LocalResponseNorm LogSigmoid "
    "LogSoftmax MSELoss MarginRankingLoss MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d "
    "Mish ModuleDict ModuleList MultiLabelMarginLoss MultiLabelSoftMarginLoss MultiMarginLoss "
    "MultiheadAttention NLLLoss NLLLoss2d PReLU PairwiseDistance ParameterDict ParameterList PixelShuffle "
    "PixelUnshuffle PoissonNLLLoss RMSNorm RNN RNNBase RNNCell RNNCellBase RReLU ReLU ReLU6 ReflectionPad1d "
    "ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d SELU Sequential SiLU "
    "Sigmoid SmoothL1Loss SoftMarginLoss Softmax Softmax2d Softmin Softplus Softshrink Softsign Tanh "
    "Tanhshrink Threshold Transformer TransformerDecoder TransformerDecoderLayer TransformerEncoder "
    "TransformerEncoderLayer TripletMarginLoss TripletMarginWithDistanceLoss Unflatten Unfold Upsample "
    "UpsamplingBilinear2d UpsamplingNearest2d ZeroPad1d ZeroPad2d ZeroPad3d"
).split())

# Submodules of the allowed packages (besides those in MODULES): a chain naming one is a module object,
# whose attributes the policy must follow, so it may not be passed around as a value.
_SUBMODULES = {
    "torch": "accelerator amp ao autograd backends cpu cuda distributions fft func functional futures jit linalg "
             "masked mps mtia nested nn ops optim quantization quasirandom random return_types signal sparse "
             "special storage testing torch_version types utils version xpu",
    "torch.cuda": "amp comm graphs jiterator memory nvtx random sparse streams",
    "torch.nn": "attention backends common_types functional grad init intrinsic modules parallel parameter qat "
                "quantizable quantized utils",
    "torch.nn.modules": "module", "torch.autograd": "function graph grad_mode",
    "torch.utils": "backcompat benchmark bundled_inputs checkpoint cpp_extension dlpack hooks jit mkldnn "
                   "mobile_optimizer viz weak",
    "torch.backends": "cpu cuda cudnn cusparselt kleidiai mha miopen mkl mkldnn mps nnpack openmp opt_einsum "
                      "python_native quantized xeon xnnpack",
    "numpy": "char core dtypes exceptions fft lib linalg ma matlib matrixlib polynomial random rec strings testing "
             "typing version",
    "numpy.lib": "stride_tricks", "os": "path", "collections": "abc",
    **{m: subs for lang in LANGUAGES.values() for m, subs in lang.submodules.items()},
}
KNOWN_MODULES = frozenset({f"{p}.{n}" for p, ns in _SUBMODULES.items() for n in ns.split()} | set(MODULES)
                          | set(HEAVY) | set(STDLIB) | set(PARTIAL))

# Prefix exceptions: the name of a dangerous stdlib module, but the package's own submodule.
OWN_SUBMODULES = ("torch.types", "torch.signal", "torch.random", "torch.cuda.random", "numpy.random", "numpy.typing",
                  "collections.abc",  # the ABCs (Iterable, Mapping …), not the abc module
                  *(m for lang in LANGUAGES.values() for m in lang.own_submodules))
# Module names that, reached as an attribute of an allowed module (`torch.os`, `typing.sys`), are
# treated as that module: a chain is re-checked from each of them.
REROOT = frozenset(n for n, c in MODULES.items() if "." not in n and c != "import") | {"os", "sys"}

# Private torch helpers that LLM-written modules copy from nn's own layers (pure functions of shapes).
PRIVATE_OK = frozenset(("torch.nn.init._calculate_fan_in_and_fan_out", "torch.nn.init._calculate_correct_fan",
                        "torch.nn.modules.utils._pair", "torch.nn.modules.utils._single",
                        "torch.nn.modules.utils._triple", "torch.nn.modules.utils._quadruple",
                        "torch.nn.modules.utils._ntuple", "torch.nn.modules.utils._reverse_repeat_tuple"))
# Tensor methods that take a (legacy) tensor type as an argument: x.view(torch.cuda.FloatTensor).
TYPE_ARG_METHODS = frozenset(("view", "type", "to"))

# Last components that set process-wide state wherever they live under the heavy packages.
SETTER_PREFIXES = ("set_", "use_deterministic")
RNG_NAMES = frozenset(("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
                       "get_rng_state_all", "set_rng_state", "set_rng_state_all", "fork_rng", "default_generator",
                       "default_generators"))
RNG_ROOTS = ("torch", "torch.cuda", "torch.random", "torch.cuda.random", "torch.mps", "torch.xpu", "torch.cpu")
GLOBAL_HOOK_PREFIX = "register_module_"
# numpy/CuPy members that read or write files, by name wherever they live (numpy.rec.fromfile,
# numpy.ma.load …): the same readers are re-exported under several modules.
ARRAY_FILE_NAMES = frozenset(("load", "loads", "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt",
                              "fromfile", "tofile", "memmap", "open_memmap", "fromregex", "DataSource", "recfromcsv",
                              "recfromtxt", "dump", "dumps", "openfile", "fromtextfile"))  # numpy.ma.mrecords's too
# Members that compile host code and load it, past the native rules and the symbol check (which see load_inline's
# sources and torch's loader): Triton's own C builder, by name wherever it is re-exported (the fourth red team's
# triton.runtime.build.compile_module_from_src ran gcc on any C and imported it, 2026-11-27).
NATIVE_BUILDERS = frozenset(("compile_module_from_src",))
NATIVE_BUILD_MODULES = ("triton.runtime.build",)
# numpy/CuPy members that read or reseed the global RNG, by name anywhere under numpy.random / cupy.random.
ARRAY_RNG_NAMES = frozenset(("seed", "get_state", "set_state", "set_bit_generator", "get_bit_generator",
                             "get_random_state", "set_random_state", "reset_states"))
# Calls that switch a process-wide mode on or off (check_sparse_tensor_invariants.enable()).
TOGGLE_NAMES = frozenset(("enable", "disable"))  # torch.nn.modules.module.register_module_forward_hook & co.

# torch.backends: reading is fine; a store, or a call that is not a query, is a process setting.
BACKENDS = "torch.backends"
BACKENDS_QUERIES = ("is_", "get_", "version", "preferred_blas_library_", "flags_frozen")

# Builtin names (when not shadowed by the candidate) by category. getattr & co. have their own rules.
BUILTINS: dict[str, str] = {
    **dict.fromkeys(("eval", "exec", "compile", "globals", "locals", "vars", "dir", "breakpoint", "id"),
                    "introspection"),
    "open": "files", "help": "processes",
    **dict.fromkeys(("exit", "quit", "SystemExit", "KeyboardInterrupt"), "exit"),
}
ATTR_BUILTINS = ("getattr", "setattr", "delattr", "hasattr")

# Attribute names that lead to frames, code objects or the class hierarchy, on any receiver.
FRAME_ATTRS = frozenset((
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "f_trace_lines", "f_trace_opcodes",
    "f_lasti", "f_lineno", "tb_frame", "tb_next", "tb_lasti", "tb_lineno", "gi_frame", "gi_code", "gi_yieldfrom",
    "gi_running", "gi_suspended", "cr_frame", "cr_code", "cr_await", "cr_origin", "cr_running", "cr_suspended",
    "ag_frame", "ag_code", "ag_await", "ag_running", "co_code", "co_consts", "co_names", "co_varnames",
    "co_freevars", "co_cellvars", "co_filename", "co_name", "co_qualname", "co_firstlineno", "co_lnotab",
    "co_linetable", "co_exceptiontable", "co_flags", "co_positions", "co_lines", "mro", "with_traceback"))
# Method names that read or write files on any receiver (ndarray.tofile, cupy Module.load_file …).
FILE_METHODS = frozenset(("tofile", "load_file", "from_file", "load_library", "dump"))
# Method names that run Python on a driver thread (CuPy stream callbacks), on any receiver.
THREAD_METHODS = frozenset(("add_callback", "launch_host_func"))
# Method names that register implementations for operators process-wide (OpOverload.py_impl …).
REGISTER_METHODS = frozenset(("py_impl", "register_kernel", "register_fake", "register_autograd",
                              "register_torch_dispatch"))
# In-place container methods: called on a data attribute of a module they mutate shared state.
MUTATORS = frozenset(("append", "extend", "insert", "add", "update", "clear", "pop", "popitem", "remove",
                      "discard", "setdefault", "sort", "reverse", "__setitem__", "__delitem__"))

# Stdlib members that evaluate strings or reach attributes by name.
STDLIB_DENIED: dict[str, str] = {
    "operator.attrgetter": "introspection", "operator.methodcaller": "introspection",
    "string.Formatter": "introspection", "typing.get_type_hints": "introspection",
    "typing.ForwardRef": "introspection", "typing.get_args": "introspection", "typing.get_origin": "introspection",
    "functools.singledispatch": "introspection", "functools.singledispatchmethod": "introspection",
    "contextlib.chdir": "files", "time.tzset": "process_setting",
    "dataclasses.fields": "introspection",  # Field.type hands out the classes of annotations
    "dataclasses.make_dataclass": "introspection",  # namespace= may define any dunder
    # enter_context() without closing leaves a context manager (a setting) entered for the process
    "contextlib.ExitStack": "process_setting", "contextlib.AsyncExitStack": "process_setting",
}

# Dunder attributes that may be read (anything else is introspection; any dunder store is monkeypatch).
DUNDER_READ = frozenset(("__init__", "__new__", "__name__", "__qualname__", "__doc__", "__version__",
                         "__module__", "__cuda_array_interface__", "__dlpack__"))
# Dunder methods a candidate may define (in its own classes). Any other (__array_interface__,
# __torch_function__, __getattr__, __format__, __del__ …) hands the interpreter, numpy or torch a hook.
DUNDER_DEFS = frozenset(("__init__", "__call__", "__repr__", "__str__", "__len__", "__getitem__", "__setitem__",
                         "__iter__", "__next__", "__contains__", "__enter__", "__exit__", "__post_init__"))
# Defining these replaces what torch does for every op it dispatches: overriding, not reading.
TORCH_HOOK_DEFS = frozenset(("__torch_function__", "__torch_dispatch__"))
# Dunders read explicitly that open a context manager by hand (never closed: a setting left changed).
CONTEXT_DUNDERS = frozenset(("__enter__", "__exit__", "__aenter__", "__aexit__"))
# Dunder names (not attributes) a candidate may use or bind.
DUNDER_NAMES = frozenset(("__name__", "__file__", "__doc__", "__debug__", "__all__", "__slots__", "__version__",
                          "__module__", "__qualname__", "__author__"))

# Environment variables whose names look like credentials (as sandbox/isolate/launch.py scrubs them).
SECRET_ENV = r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE"
SECRET_ENV_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_", "GCLOUD_", "GCP_", "CLOUDSDK_", "ARM_", "KEVOLVE_", "HF_",
                       "HUGGING", "OPENAI", "ANTHROPIC", "GITHUB_", "GH_", "GEMINI", "MISTRAL", "COHERE")
