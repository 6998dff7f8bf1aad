"""The kernel languages a candidate may write in: one entry per language, read by everyone who needs to know.

The candidate policy (which modules it may import, which decorators make a function a compiled kernel), the
runner (what it imports while warm), isolation (which compile caches a runner is confined to), the evaluation
image (which distributions it installs), prompts (`agent/prompts/target_<name>.md`), the archive (how a source is
recognised and tagged), the CLI (`--language`, the install hint) and `records.KernelLanguage` all read this
table; none spells a language again. Adding one is an entry here, its prompt file, and a build recipe where it
needs one (docs/languages.md). Ground floor: imports nothing of kevolve's and nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Language:
    """What kevolve needs to know about one kernel language."""

    name: str  # `--language` value and `KernelLanguage` value
    summary: str  # one line: how its kernels are written and built
    gpu_only: bool  # its kernels need `--device cuda`
    modules: tuple[str, ...] = ()  # top-level Python modules a candidate imports for it (the policy allows them)
    submodules: dict[str, str] = field(default_factory=dict)  # module -> its submodules the policy knows
    # The candidate policy's rules for its modules (sandbox/policy/tables.py merges them): submodules a candidate may
    # not import, by category; members by longest prefix ("allow" for an exception under a denied one); its own
    # submodules that share a dangerous standard module's name (`cupy.random`).
    denied_modules: dict[str, str] = field(default_factory=dict)
    members: dict[str, str] = field(default_factory=dict)
    own_submodules: tuple[str, ...] = ()
    warm: tuple[str, ...] = ()  # imported by a runner before it reports warm (their import is seconds)
    array_module: bool = False  # a NumPy-like array library: its file readers and global RNG are NumPy's rules
    jit_decorators: tuple[tuple[str, ...], ...] = ()  # decorators whose function its compiler runs, not Python
    # How a source names its kernels, for the judge's custom-kernel check: functions under one of these
    # decorators (dotted: "triton.jit"), and regular expressions whose group is a kernel's name
    kernel_decorators: tuple[str, ...] = ()
    kernel_name_patterns: tuple[str, ...] = ()
    caches: tuple[tuple[str, str], ...] = ()  # (environment variable, folder): a compile cache kept in scratch
    recognise: tuple[str, ...] = ()  # regular expressions that say a source uses it (the archive's tag)
    fence_tags: tuple[str, ...] = ()  # code-fence labels an LLM puts on a Python file in it
    extra: str = ""  # the pip extra that installs its modules
    dists: tuple[str, ...] = ()  # distributions the GPU evaluation image installs for it

    @property
    def prompt(self) -> str:
        """The prompt file (agent/prompts/) that tells a proposer how to write kernels in it."""
        return f"target_{self.name}.md"


LANGUAGES: dict[str, Language] = {lang.name: lang for lang in (
    Language("cuda", "CUDA C++ (C++ on the CPU) built by torch.utils.cpp_extension.load_inline", gpu_only=False),
    Language("cupy", "CUDA C++ compiled by NVRTC through CuPy's RawKernel / RawModule", gpu_only=True,
             modules=("cupy",), submodules={"cupy": "cuda fft lib linalg random sparse testing",
                                            "cupy.cuda": "memory stream texture cub"},
             denied_modules={**dict.fromkeys(("cupy.cuda.profiler", "cupy.cuda.runtime", "cupy.cuda.driver"),
                                              "introspection"),
                             **dict.fromkeys(("cupy.cuda.nvrtc", "cupy.cuda.compiler", "cupy.cuda.jitify",
                                              "cupy.cuda.compile_with_cache"), "native")},
             members={  # read-only queries of CuPy's raw CUDA runtime bindings stay allowed
                 **dict.fromkeys((f"cupy.cuda.runtime.{n}" for n in (
                     "getDevice", "getDeviceCount", "getDeviceProperties", "deviceGetAttribute", "runtimeGetVersion",
                     "driverGetVersion", "deviceSynchronize", "is_hip")), "allow"),
                 **{f"cupy.cuda.runtime.{n}": "process_setting" for n in (
                     "deviceSetLimit", "setDevice", "streamSetAttribute", "ctxResetPersistingL2Cache",
                     "deviceSetCacheConfig", "deviceSetSharedMemConfig", "setDeviceFlags", "deviceReset",
                     "profilerStart", "profilerStop")},
                 "cupy.cuda.driver.ctxGetCurrent": "allow"},
             own_submodules=("cupy.random",),
             kernel_name_patterns=(r"(?:RawKernel\s*\([\s\S]*?,\s*|get_function\s*\(\s*)['\"](\w+)['\"]",),
             warm=("cupy",), array_module=True, jit_decorators=(("cupy", "fuse"),),
             caches=(("CUPY_CACHE_DIR", "cupy"),), recognise=(r"cupy\.RawKernel|cp\.RawKernel|RawModule",),
             extra="kevolve[cuda]", dists=("cupy-cuda13x", "cupy-cuda12x", "cupy", "nvidia-cuda-nvrtc",
                                           "nvidia-cuda-nvrtc-cu12")),
    Language("triton", "@triton.jit kernels, compiled by Triton at their first launch", gpu_only=True,
             modules=("triton",), submodules={"triton": "language runtime compiler testing tools",
                                              "triton.language": "extra math random core standard",
                                              "triton.language.extra": "cuda libdevice",
                                              "triton.language.extra.cuda": "libdevice"},
             denied_modules={"triton.knobs": "process_setting"}, members={"triton.compile": "files"},
             own_submodules=("triton.language.random", "triton.language.math"),
             kernel_decorators=("triton.jit",),
             warm=("triton", "triton.language"), jit_decorators=(("triton",),),
             caches=(("TRITON_CACHE_DIR", "triton"),),
             recognise=(r"@triton\.jit", r"import\s+triton", r"from\s+triton\b"), fence_tags=("triton",),
             dists=("triton",)),
)}



def kernel_modules() -> tuple[str, ...]:
    """Every language's top-level modules."""
    return tuple(m for lang in LANGUAGES.values() for m in lang.modules)


def array_modules() -> tuple[str, ...]:
    """NumPy and the languages' NumPy-like array libraries."""
    return ("numpy", *(m for lang in LANGUAGES.values() if lang.array_module for m in lang.modules))


def compile_caches() -> tuple[tuple[str, str], ...]:
    """(environment variable, scratch folder) of every language's compile cache."""
    return tuple(c for lang in LANGUAGES.values() for c in lang.caches)


def language(name: str) -> Language:
    """The entry for `name` (KeyError names the choices)."""
    try:
        return LANGUAGES[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a kernel language kevolve knows: {', '.join(LANGUAGES)}") from None


__all__ = ["LANGUAGES", "Language", "array_modules", "compile_caches", "kernel_modules", "language"]
