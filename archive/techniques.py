"""Technique tags from static analysis of a kernel's source (CUDA C++, CuPy or Triton).

Each tag is a named set of regular expressions over the source with comments removed; a tag is
given when any of them matches. The tags feed search (keyword and embedding text), filters, and the
agent's prompts ("this kernel got 3.1x with shared_memory, tiling, warp_shuffle").
"""

from __future__ import annotations

import re

from kevolve.languages import LANGUAGES

_RULES: dict[str, tuple[str, ...]] = {
    "shared_memory": (r"__shared__", r"extern\s+__shared__", r"tl\.static_alloc"),
    "vectorized_loads": (r"\b(float|half|int|uint|double|bfloat16)[248]\b", r"reinterpret_cast\s*<\s*(const\s+)?"
                         r"(float|int|half|uint)[248]", r"__ldg\s*\(\s*reinterpret_cast", r"\b__half2\b|\bhalf2\b",
                         r"__nv_bfloat162\b", r"\.ld\.global\.v[24]", r"tl\.(multiple_of|max_contiguous)\s*\("),
    "warp_shuffle": (r"__shfl(_xor|_down|_up)?(_sync)?\s*\(", r"\bwarp_reduce\w*\s*\(",
                     r"cg::reduce\s*\(", r"__reduce_\w+_sync\s*\("),
    "tensor_cores": (r"\bwmma::", r"\bnvcuda::wmma\b", r"\bmma\.sync\b", r"\bmma_sync\s*\(", r"\bwgmma\b",
                     r"\bcute::", r"\bcutlass::", r"\btl\.dot\s*\(", r"ldmatrix"),
    "tiling": (r"\bTILE(_\w+)?\b", r"\bTILE_?SIZE\b", r"\bBLOCK_(SIZE_)?[MNK]\b", r"\btile\w*\s*\[",
               r"__shared__[^;]*\[[^\]]+\]\s*\[", r"tl\.arange\s*\("),
    "fusion": (r"\bfused\w*", r"\bfuse\w*"),
    "loop_unrolling": (r"#pragma\s+unroll", r"tl\.static_range\s*\("),
    "read_only_cache": (r"__ldg\s*\(", r"const\s+\w+\s*\*\s*__restrict__"),
    "atomics": (r"\batomic(Add|Max|Min|CAS|Exch|Sub|And|Or)\w*\s*\(", r"tl\.atomic_\w+\s*\("),
    "async_copy": (r"cp\.async", r"__pipeline_memcpy_async", r"cuda::memcpy_async", r"\bcp_async\w*",
                   r"cuda::pipeline", r"\bTMA\b|cp\.async\.bulk", r"\bnum_stages\s*=\s*[2-9]",
                   r"tl\.make_tensor_descriptor|_experimental_make_tensor_descriptor"),
    "half_precision": (r"\b__half\b|\bhalf\b", r"__nv_bfloat16", r"__float2half", r"tl\.float16|tl\.bfloat16"),
    "fast_math": (r"__expf|__logf|__fdividef|__sinf|__cosf|__powf|rsqrtf|__frcp_rn|__fmul_rn", r"--use_fast_math"),
    "grid_stride_loop": (r"\+=\s*(blockDim\.x\s*\*\s*gridDim\.x|gridDim\.x\s*\*\s*blockDim\.x)",),
    "cooperative_groups": (r"cooperative_groups", r"\bcg::"),
    "streams": (r"cudaStream_t", r"getCurrentCUDAStream"),
    # each kernel language that says how to recognise it is a tag of its own (kevolve/languages.py)
    **{name: lang.recognise for name, lang in LANGUAGES.items() if lang.recognise},
    "autotuning": (r"@triton\.autotune", r"triton\.Config\s*\("),
    "inline_cuda": (r"load_inline\s*\(",),  # CUDA only with CUDA sources: see techniques()
}
_COMPILED = {tag: re.compile("|".join(f"(?:{p})" for p in pats)) for tag, pats in _RULES.items()}
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)

TAGS: tuple[str, ...] = (*_RULES, "inline_cpp")
"""Every tag this module can give, in a stable order."""
# load_inline builds CUDA only when given CUDA sources (the keyword, or kernels in the source); a
# C++-only extension (the CPU path) is inline_cpp, not inline_cuda.
_CUDA_SOURCES = re.compile(r"\bcuda_sources\s*=|__global__")


def _fused_ops(source: str) -> bool:
    """Fusion without the word: a single kernel body that applies two or more elementwise ops."""
    bodies = re.findall(r"__global__[^{]*\{(.*?)\n\}", source, re.S)
    ops = (r"fmaxf|max\(", r"expf|__expf|exp\(", r"tanhf|tanh\(", r"\*\s*[\w\]]+\s*\+", r"sqrtf|rsqrtf")
    return any(sum(bool(re.search(o, b)) for o in ops) >= 3 for b in bodies)


def techniques(source: str) -> tuple[str, ...]:
    """The technique tags found in ``source``, in the order of ``TAGS``."""
    code = _COMMENTS.sub(" ", source)
    found = {tag for tag, rx in _COMPILED.items() if rx.search(code)}
    if "fusion" not in found and _fused_ops(code):
        found.add("fusion")
    if "inline_cuda" in found and not _CUDA_SOURCES.search(code):
        found.discard("inline_cuda")
        found.add("inline_cpp")
    return tuple(t for t in TAGS if t in found)
