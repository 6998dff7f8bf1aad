"""Run the offline proposer's generated CUDA on the CPU: a test harness, not a simulator of timing.

The kernels' text is compiled by g++ against a small shim (`SHIM`): every CUDA thread of a block is a
fiber with its own stack, `__syncthreads()` and `__shfl_xor_sync` are rendezvous between the fibers of
the block or of the warp, `__shared__` arrays are statics (one block runs at a time), vector types are
16-byte aligned structs. The candidate's own Python launcher runs unchanged on CPU tensors, with
`cp.RawModule` replaced by the compiled library, so its grid, its partials buffer and its choice of
scalar twin are what a GPU would get. `torch.empty` gives NaN-filled tensors here, so an element or a
partial that no kernel writes shows up, followed by a guard zone checked after every launch, so a write
past the end raises `OutOfBounds`.

What it cannot show: races between blocks (blocks run one after another), memory-model or
occupancy effects, and CUDA's exact libm (`rsqrtf` is 1/sqrtf). x86-64 Linux with g++ only.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import re
import shutil
import subprocess
import tempfile
import types
from collections.abc import Callable
from pathlib import Path

import torch

SHIM = r"""
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__
#define __shared__ static

struct kv_dim3 { unsigned int x = 0, y = 0, z = 0; };
kv_dim3 threadIdx, blockIdx, gridDim, blockDim;  // globals: fibers switch through an opaque call

struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T min(T a, T b) { return b < a ? b : a; }
template <class T> static inline T max(T a, T b) { return a < b ? b : a; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int i; std::memcpy(&i, &f, 4); return i; }
struct alignas(8) uint2 { unsigned int x, y; };  // four 16-bit (bf16 / fp16) elements of a vector access
static inline uint2 make_uint2(unsigned int x, unsigned int y) { return {x, y}; }
using std::isnan;  // CUDA's isnan is a global function

// Fibers: a minimal x86-64 SysV context switch (callee-saved registers and the stack pointer).
extern "C" void kv_swap(void** save_sp, void* new_sp);
asm(R"(
.text
.globl kv_swap
.type kv_swap,@function
kv_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
)");

static const size_t KV_STACK = 64 * 1024;
std::vector<void*> kv_sp;
std::vector<char> kv_done;
std::vector<char*> kv_stacks;
void* kv_sched_sp = nullptr;
int kv_cur = 0;
std::function<void()> kv_body;
unsigned long kv_bar_gen = 0, kv_bar_count = 0;
std::vector<unsigned long> kv_wgen, kv_wcount;
std::vector<float> kv_wbuf;

static inline void kv_yield() { kv_swap(&kv_sp[kv_cur], kv_sched_sp); }

extern "C" void kv_entry() {
  kv_body();
  kv_done[kv_cur] = 1;
  kv_yield();
  std::abort();  // a finished fiber is never resumed
}

static void __syncthreads() {
  unsigned long gen = kv_bar_gen;
  if (++kv_bar_count == blockDim.x) { kv_bar_count = 0; ++kv_bar_gen; return; }
  while (kv_bar_gen == gen) kv_yield();
}

static void kv_warp_sync(unsigned w) {
  unsigned long gen = kv_wgen[w];
  if (++kv_wcount[w] == 32) { kv_wcount[w] = 0; ++kv_wgen[w]; return; }
  while (kv_wgen[w] == gen) kv_yield();
}

static float __shfl_xor_sync(unsigned, float v, int o) {
  unsigned t = threadIdx.x, w = t / 32, l = t % 32;
  kv_wbuf[t] = v;
  kv_warp_sync(w);
  float r = kv_wbuf[w * 32 + (l ^ (unsigned)o)];
  kv_warp_sync(w);
  return r;
}

// Run `body` as blockDim.x threads of each block of the grid, one block after another.
static void kv_launch(unsigned gx, unsigned gy, unsigned bx, std::function<void()> body) {
  if (bx % 32) std::abort();
  kv_body = std::move(body);
  gridDim = {gx, gy, 1};
  blockDim = {bx, 1, 1};
  kv_sp.assign(bx, nullptr);
  kv_done.assign(bx, 0);
  kv_wgen.assign(bx / 32, 0);
  kv_wcount.assign(bx / 32, 0);
  kv_wbuf.assign(bx, 0.0f);
  while (kv_stacks.size() < bx) kv_stacks.push_back(static_cast<char*>(std::aligned_alloc(64, KV_STACK)));
  for (unsigned by = 0; by < gy; ++by)
    for (unsigned bxi = 0; bxi < gx; ++bxi) {
      blockIdx = {bxi, by, 0};
      kv_bar_count = 0;
      for (unsigned t = 0; t < bx; ++t) {
        // Initial frame: six callee-saved registers, then kv_entry as the return address at top - 16,
        // so that kv_entry starts with rsp = top - 8 = 8 (mod 16), as after a call.
        uintptr_t top = reinterpret_cast<uintptr_t>(kv_stacks[t] + KV_STACK) & ~uintptr_t(15);
        void** sp = reinterpret_cast<void**>(top - 8);
        *--sp = reinterpret_cast<void*>(&kv_entry);
        for (int k = 0; k < 6; ++k) *--sp = nullptr;
        kv_sp[t] = sp;
        kv_done[t] = 0;
      }
      for (bool left = true; left;) {
        left = false;
        for (unsigned t = 0; t < bx; ++t) {
          if (kv_done[t]) continue;
          left = true;
          kv_cur = (int)t;
          threadIdx = {t, 0, 0};
          kv_swap(&kv_sched_sp, kv_sp[t]);
        }
      }
    }
}
"""

_SIG = re.compile(r'extern "C" __global__ void __launch_bounds__\((\d+)\) (\w+)\(([^)]*)\)')


def kernels(cuda: str) -> dict[str, tuple[int, int]]:
    """The kernels of a CUDA text: name -> (launch bound, number of pointer arguments)."""
    return {m.group(2): (int(m.group(1)), m.group(3).count(",") + 1) for m in _SIG.finditer(cuda)}


def _param_types(cuda: str) -> dict[str, list[str]]:
    """The kernels of a CUDA text: name -> the C type of each pointer parameter (`const unsigned short*` …)."""
    return {m.group(2): [p.strip().rsplit(" ", 1)[0].replace(" __restrict__", "") for p in m.group(3).split(",")]
            for m in _SIG.finditer(cuda)}


def build(cuda: str, workdir: Path | None = None) -> Callable[[str], Callable]:
    """Compile a CUDA text for the CPU; returns `fn(name)`, a launcher `(grid, block, tensors)` like CuPy's."""
    ks, types_ = kernels(cuda), _param_types(cuda)
    runners = []
    for name, (_, n) in ks.items():
        args = ", ".join(f"({types_[name][i]})a[{i}]" for i in range(n))
        runners.append(f'extern "C" void kvrun_{name}(unsigned gx, unsigned gy, unsigned bx, void** a) '
                       f"{{ kv_launch(gx, gy, bx, [&] {{ {name}({args}); }}); }}")
    text = SHIM + cuda + "\n" + "\n".join(runners) + "\n"
    tag = hashlib.sha256(text.encode()).hexdigest()[:16]
    work = workdir or Path(tempfile.gettempdir()) / "kevolve_cuda_cpu"
    work.mkdir(parents=True, exist_ok=True)
    lib_path = work / f"k{tag}.so"
    if not lib_path.exists():
        cpp = work / f"k{tag}.cpp"
        cpp.write_text(text)
        tmp = work / f"k{tag}.{id(text)}.so"
        subprocess.run(["g++", "-std=c++17", "-O2", "-fno-fast-math", "-ffp-contract=off", "-shared", "-fPIC",
                        "-w", "-o", str(tmp), str(cpp)], check=True, capture_output=True, text=True)
        tmp.replace(lib_path)
    lib = ctypes.CDLL(str(lib_path))

    def fn(name: str) -> Callable:
        bound, n = ks[name]
        run = getattr(lib, f"kvrun_{name}")

        def launch(grid: tuple, block: tuple, tensors: tuple) -> None:
            g = (*grid, 1, 1)
            assert block[0] == bound, f"{name}: launched with {block[0]} threads, written for {bound}"
            assert len(tensors) == n and all(t.dtype in STORAGE for t in tensors)
            ptrs = (ctypes.c_void_p * n)(*(t.data_ptr() for t in tensors))
            run(ctypes.c_uint(g[0]), ctypes.c_uint(g[1]), ctypes.c_uint(block[0]), ptrs)
        return launch
    return fn


def available() -> bool:
    """Whether this machine can run the harness (x86-64 Linux with g++)."""
    import platform

    return platform.machine() in ("x86_64", "AMD64") and platform.system() == "Linux" and shutil.which("g++") is not None


GUARD = 4096  # elements past the end of each buffer the launcher allocates, checked after every launch
_SENTINEL = 1234.5
STORAGE = (torch.float32, torch.bfloat16, torch.float16)
"""the tensors a kernel may be given: fp32, and 16-bit storage (an `unsigned short` in the kernel)"""


class OutOfBounds(AssertionError):
    """A kernel wrote past the end of a buffer its launcher allocated (a GPU would corrupt memory silently)."""


def _guarded_empty(guards: list) -> Callable:
    def empty(*size, **kw):  # noqa: ANN002, ANN003, ANN202
        kw.pop("device", None)
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else size
        n = 1
        for d in shape:
            n *= int(d)
        buf = torch.full((n + GUARD,), float("nan"), **kw)
        buf[n:] = _SENTINEL  # rounded in a 16-bit buffer: the guard compares with what it holds
        guards.append((buf[n:], buf[n:].clone()))
        return buf[:n].view(shape)
    return empty


def load(candidate: str, workdir: Path | None = None, strict: bool = True) -> dict:
    """Execute a generated candidate with its CUDA compiled for the CPU; its `_kv_launch_K` functions then
    run the real kernels on CPU tensors (the namespace also records launches in `_KV_LAUNCHES`, and
    writes past a buffer's end in `_KV_OOB`, which raise `OutOfBounds` when `strict`)."""
    ns: dict = {"__name__": "candidate"}
    exec(compile(candidate, "candidate", "exec"), ns)  # noqa: S102 - the offline proposer's own output
    fn = build(ns["_KV_SRC"], workdir)
    launches: list[tuple[str, tuple, tuple]] = []
    guards: list[torch.Tensor] = []
    oob: list[str] = []

    def kv_fn(name: str) -> Callable:
        run = fn(name)

        def call(grid: tuple, block: tuple, tensors: tuple) -> None:
            launches.append((name, tuple(grid), tuple(block)))
            run(grid, block, tensors)
            if any(bool((g != want).any()) for g, want in guards):
                oob.append(f"{name} {grid}: wrote past the end of a buffer its launcher allocated")
                if strict:
                    raise OutOfBounds(oob[-1])
        return call

    fake_torch = types.SimpleNamespace(**{k: getattr(torch, k) for k in dir(torch) if not k.startswith("__")})
    fake_torch.empty = _guarded_empty(guards)
    fake_torch.cuda = types.SimpleNamespace(current_stream=lambda *a: types.SimpleNamespace(cuda_stream=0))
    ns.update(torch=fake_torch, _kv_fn=kv_fn, _kv_sms=lambda dev: 132, _KV_LAUNCHES=launches, _KV_OOB=oob,
              cp=types.SimpleNamespace(asarray=lambda t: t,
                                       cuda=types.SimpleNamespace(ExternalStream=lambda s: contextlib.nullcontext())))
    ns["_kv_launch"] = lambda name, grid, block, tensors: kv_fn(name)((grid,), (block,), tensors)
    ns["_kv_stream"] = contextlib.nullcontext
    ns["_kv_args"] = tuple  # the CPU build takes the tensors themselves, not their device addresses
    return ns
