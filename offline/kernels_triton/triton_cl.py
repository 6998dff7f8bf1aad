"""The 'library' layout of a Triton convolution (triton_conv.py): the library's convolution (cuDNN) runs on a
channels-last copy of the input, made by a tiled Triton kernel, and the generated kernel is only the epilogue.
Here: that copy kernel, the launcher lines around the library call, and compiling the copy without a GPU."""

from __future__ import annotations

import math

from kevolve.offline.kernels_direct.conv import ConvSpec
from kevolve.offline.graph.ir import Group
from kevolve.offline.kernels_triton.triton_launch import compile_kernel


def big_offsets(s: ConvSpec) -> bool:
    """Whether flat offsets can pass int32 (KernelBench level 1 has multi-GB inputs and outputs)."""
    n_in = s.batch * s.cin * math.prod(s.in_size)
    n_out = s.batch * s.cout * math.prod(s.out_size)
    return max(n_in, n_out) >= 2**31 - 1


CL_BLOCK_S = 64
"""the input's channels-last copy: spatial positions per tile"""


def cl_block_c(cin: int) -> int:
    """Channels per tile of the channels-last copy: the channels rounded up to a power of two, 4 to 64."""
    return max(4, min(64, 1 << (cin - 1).bit_length()))


def channels_last_source(name: str, s: ConvSpec) -> str:
    """A kernel copying the NCHW input to channels-last, a (channels x positions) tile per program: loads run along
    the positions, stores along the channels. On the H100 torch's own copy (`.contiguous(memory_format=…)`) took
    0.595 ms for KernelBench L2 1's input, Inductor's tiled Triton copy 0.357 ms."""
    sp = math.prod(s.in_size)
    n = "tl.program_id(2).to(tl.int64)" if big_offsets(s) else "tl.program_id(2)"
    rc = "rc.to(tl.int64)" if s.cin * sp >= 2**31 - 1 else "rc"
    rs = "rs.to(tl.int64)" if s.cin * sp >= 2**31 - 1 else "rs"
    return f'''

@triton.jit
def {name}(X, Y, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    """the convolution's input [{s.batch}, {s.cin}, {sp}] copied to [{s.batch}, {sp}, {s.cin}]"""
    base = {n} * {s.cin * sp}
    rs = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    rc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    m = (rc[:, None] < {s.cin}) & (rs[None, :] < {sp})
    v = tl.load(X + base + ({rc} * {sp})[:, None] + {rs}[None, :], mask=m, other=0.0)
    tl.store(Y + base + ({rs} * {s.cin})[None, :] + {rc}[:, None], v, mask=m)
'''


def library_call(s: ConvSpec, name: str) -> list[str]:
    """Launcher lines: a0 (input) copied channels-last by the kernel `name`_cl, a1 (weight) made channels-last by
    torch (small), a0 replaced by their convolution with torch.nn.functional, without bias, in channels-last memory
    (asked for again: a no-op when it already is)."""
    nd = len(s.kernel)
    fmt = "torch.channels_last" if nd == 2 else "torch.channels_last_3d"
    sp = math.prod(s.in_size)
    bc = cl_block_c(s.cin)
    grid = (-(-sp // CL_BLOCK_S), -(-s.cin // bc), s.batch)
    call = (f"torch.nn.functional.conv_transpose{nd}d(xcl, a1, None, {s.stride!r}, {s.padding!r}, "
            f"{s.output_padding!r}, {s.groups}, {s.dilation!r})" if s.transposed else
            f"torch.nn.functional.conv{nd}d(xcl, a1, None, {s.stride!r}, {s.padding!r}, {s.dilation!r}, {s.groups})")
    return ["    a0 = a0.contiguous()", f"    xcl = torch.empty_like(a0, memory_format={fmt})",
            f"    {name}_cl[{grid!r}](a0, xcl, BLOCK_C={bc}, BLOCK_S={CL_BLOCK_S}, num_warps=4)",
            f"    a1 = a1.contiguous(memory_format={fmt})", f"    a0 = {call}.contiguous(memory_format={fmt})"]


def compile_copy_for(kernel: object, group: Group, arch: int = 90) -> dict[str, str]:
    """Compile the library layout's channels-last copy (`channels_last_source`) for `arch` without a GPU."""
    conv: ConvSpec = group.spec.conv  # type: ignore[attr-defined]  # a `tconv` group's TConvSpec
    consts = {"BLOCK_C": cl_block_c(conv.cin), "BLOCK_S": CL_BLOCK_S}
    return compile_kernel(kernel, {"X": "*fp32", "Y": "*fp32"} | dict.fromkeys(consts, "constexpr"), consts,
                          {"num_warps": 4}, arch)


__all__ = ["CL_BLOCK_S", "big_offsets", "channels_last_source", "cl_block_c", "compile_copy_for", "library_call"]
