"""The parameters of one kernel the offline generator writes (`KernelParams`), and the reader of the comment that
carried them in sources written before they were a record.

On the ground floor so that a `Candidate` can carry what the offline generator chose (records.OfflineChoice);
the space they live in (defaults, legal values, mutation) is offline/space.py's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# Until 2026-11-27 a generated source carried its parameters as one JSON comment line, read back from the
# source by the next job. Only records written before then are read this way (records.Candidate).
_LEGACY_MARK = re.compile(r"^# kevolve-offline: (\{.*\})\s*$", re.MULTILINE)


@dataclass(frozen=True)
class KernelParams:
    """Settings of one generated kernel (each group has its own)."""

    block: int = 256
    """threads per block"""
    vec: int = 4
    """pointwise and row kernels: elements per vector load/store (float4 = 4) where the layout is contiguous;
    a scalar twin runs when a pointer is not 16-byte aligned"""
    ilp: int = 1
    """pointwise: vector slots per thread per loop iteration (independent loads in flight)"""
    waves: int = 8
    """grid size cap, in blocks per SM (grid-stride loops cover the rest)"""
    strategy: str = "block"
    """row kernels: a block, a warp or a thread per row, or several blocks per row ('split')"""
    unroll: int = 1
    """row kernels: vector loads in flight per thread in each walk over a row"""
    onepass: bool = True
    """row kernels: mean+variance (Welford) and max+sum-of-exp (online softmax) in one walk, not two"""
    graph: bool = False
    """the whole forward captured once and replayed as a CUDA graph (read from the first group; the search
    tries it on its best candidate, it is never a default)"""
    tile_m: int = 128
    """Triton product ('mm' groups): rows of the output tile"""
    tile_n: int = 128
    """Triton product: columns of the output tile"""
    tile_k: int = 32
    """Triton product: depth of each step along K"""
    warps: int = 8
    """Triton product: warps per program"""
    stages: int = 3
    """Triton product: software-pipeline stages (tiles in flight in shared memory)"""
    precision: str = "tf32x3"
    """Triton product: 'tf32x3' (three TF32 tensor-core products, fp32-level error) or 'ieee' (fp32 FMA)"""
    layout: str = "nchw"
    """Triton convolution: 'nchw' reads the input as it is (one flat loop over channels x window), 'nhwc' has
    the launcher make it channels-last, so each step's loads run along a group's channels; 'library' (2-d and
    3-d) leaves the convolution to the library (cuDNN) on channels-last input and weight, without its bias,
    and the kernel is only the epilogue: bias and element-wise chain on the channels-last result, written
    in the output's own layout (what Inductor does: on the H100, cuDNN's TF32 convolution of KernelBench L2 1
    ran 2.86 ms NCHW with its bias, 0.87 ms channels-last without)"""
    split_k: int = 1
    """Triton product with no epilogue: K cut into this many slices, one program per (tile, slice), each
    adding its partial product into a zeroed output (a matrix-vector product's 16 row tiles of a 1M-long K,
    KernelBench L1 4, kept 16 of the H100's 132 SMs busy: 0.13x eager)"""


def legacy_choice(source: str, problem_id: str | None) -> dict[str, object] | None:
    """The technique and per-group parameters in an old offline source's `# kevolve-offline:` line (its problem's
    must be `problem_id`), as `OfflineChoice` fields; None where there is no such readable line."""
    m = _LEGACY_MARK.search(source)
    if m is None:
        return None
    try:
        data = json.loads(m.group(1))
        if not isinstance(data, dict) or data.get("problem") != problem_id:
            return None
        groups = tuple(KernelParams(**g) for g in data["groups"])
    except (ValueError, TypeError, KeyError):
        return None
    return {"technique": str(data.get("technique", "cuda")), "groups": groups}


__all__ = ["KernelParams", "legacy_choice"]
