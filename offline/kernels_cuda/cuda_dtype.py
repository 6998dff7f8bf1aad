"""Storage dtypes in generated CUDA: the C type of a pointer, and the text that widens a load to float or
rounds a float for a store (the conversion functions are in `STORAGE_PRELUDE`, part of `cuda.PRELUDE`).

bfloat16 and float16 are `unsigned short` in the kernels, so no CUDA header is needed (NVRTC has none
here): bf16 widens by a shift and rounds to nearest even in integer arithmetic (NaN stays NaN); fp16
converts with PTX's `cvt` where the code is compiled for a GPU, and in integer arithmetic on the host (the
CPU harness of tests/cuda_cpu.py). A vector access of 16-bit values reads 2 (`unsigned int`) or 4 (`uint2`)
of them, element 0 in the low half of each word (little-endian).
"""

from __future__ import annotations

from kevolve.offline.graph.dtypes import NARROW, size_of

STORAGE_PRELUDE = r"""
// 16-bit storage (bfloat16, float16) as unsigned short: loads widen to float, stores round to nearest even
__device__ __forceinline__ float kv_bf16_f32(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ unsigned short kv_f32_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN: a quiet NaN
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float kv_f16_f32(unsigned short h) {
#ifdef __CUDA_ARCH__
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
#else
  unsigned int s = ((unsigned int)h & 0x8000u) << 16, e = ((unsigned int)h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31u) return __uint_as_float(s | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));  // inf; NaN quiet
  if (e == 0u) { float v = (float)m * 5.9604644775390625e-08f; return s ? -v : v; }  // subnormal: m * 2^-24
  return __uint_as_float(s | ((e + 112u) << 23) | (m << 13));
#endif
}
__device__ __forceinline__ unsigned short kv_f32_f16(float f) {
#ifdef __CUDA_ARCH__
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned int u = __float_as_uint(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN: a quiet NaN
  if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);  // 65520 and above round to infinity
  if (a < 0x38800000u) return (unsigned short)(s | (unsigned int)rintf(__uint_as_float(a) * 16777216.0f));
  unsigned int r = a - 0x38000000u;  // the exponent rebiased from 127 to 15
  return (unsigned short)(s | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
#endif
}
"""

_TAG = {"bfloat16": "bf16", "float16": "f16"}


def ctype(dtype: str) -> str:
    """The C element type of a pointer to this storage."""
    return "unsigned short" if dtype in NARROW else "float"


def widen(dtype: str, raw: str) -> str:
    """The float value of `raw`, an element as stored."""
    return f"kv_{_TAG[dtype]}_f32({raw})" if dtype in NARROW else raw


def narrow(dtype: str, value: str) -> str:
    """`value` (a float) as stored: rounded to nearest even for 16-bit storage."""
    return f"kv_f32_{_TAG[dtype]}({value})" if dtype in NARROW else value


def vec_type(dtype: str, vec: int) -> str:
    """The C type of one `vec`-element access (float2 / float4, or 4 / 8 bytes of 16-bit elements)."""
    if dtype in NARROW:
        return {2: "unsigned int", 4: "uint2"}[vec]
    return {2: "float2", 4: "float4"}[vec]


def _words(dtype: str, vec: int, var: str) -> list[str]:
    return [var] if vec == 2 else [f"{var}.x", f"{var}.y"]


def lanes(dtype: str, vec: int, var: str) -> list[str]:
    """The float values of the `vec` elements held by `var`, a loaded vector."""
    if dtype not in NARROW:
        return [f"{var}.{c}" for c in "xyzw"[:vec]]
    return [widen(dtype, f"(unsigned short)({w}{half})") for w in _words(dtype, vec, var)
            for half in (" & 0xffffu", " >> 16")]


def pack(dtype: str, vec: int, values: list[str]) -> str:
    """The vector that stores `values` (floats), each rounded to the storage."""
    if dtype not in NARROW:
        return f"make_float{vec}({', '.join(values)})"
    words = [f"((unsigned int){narrow(dtype, a)} | ((unsigned int){narrow(dtype, b)} << 16))"
             for a, b in zip(values[::2], values[1::2], strict=True)]
    return words[0] if vec == 2 else f"make_uint2({', '.join(words)})"


def zero(dtype: str, vec: int) -> str:
    """A vector of zeros (the value of a slot past the row's end)."""
    if dtype not in NARROW:
        return f"make_float{vec}({', '.join(['0.0f'] * vec)})"
    return "0u" if vec == 2 else "make_uint2(0u, 0u)"


def aligned(tensor: str, dtype: str, vec: int) -> str:
    """A Python condition of a launcher: `tensor`'s pointer is aligned for `vec`-element accesses."""
    return f"{tensor}.data_ptr() % {size_of(dtype) * vec} == 0"
