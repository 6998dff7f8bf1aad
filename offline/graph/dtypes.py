"""The storage dtypes a fused group reads and writes: float32, bfloat16 and float16.

Arithmetic is float32 whatever the storage, as PyTorch's own bf16 / fp16 kernels do (their `opmath`): a
load widens exactly, a store rounds to nearest even. Inside a group a value is not rounded between ops of
one dtype (as Inductor fuses); where PyTorch promotes a narrow value it stored to a wider dtype (a bf16
intermediate added to an fp32 tensor), the group rounds it there (`round_<dtype>` ops), so the wider result
is what PyTorch computes. An operand wider than its result (an fp32 0-d tensor times a bf16 tensor: PyTorch
rounds it to bf16 on the GPU, not as a CPU scalar) is left unfused, with the reason.
"""

from __future__ import annotations

import torch

STORAGE: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
"""dtype name (as `LeafSpec.dtype` and `Group.out_dtype` hold it) -> torch dtype"""

NARROW = ("bfloat16", "float16")
"""16-bit storage: stored as `unsigned short` in generated CUDA (no CUDA header needed under NVRTC)"""

ROUND_OP = {"bfloat16": "round_bf16", "float16": "round_fp16"}
"""the IR op that rounds a float32 value to this dtype and widens it back (what PyTorch stored, read wider)"""


def name_of(dtype: torch.dtype | None) -> str | None:
    """The storage name of a torch dtype, None for a dtype a fused group does not store (ints, bool, float64)."""
    return next((k for k, v in STORAGE.items() if v == dtype), None)


def size_of(name: str) -> int:
    """Bytes per element of a storage dtype."""
    return 4 if name == "float32" else 2


def widens_exactly(narrow: str, wide: str) -> bool:
    """Whether every value of `narrow` is a value of `wide` (bf16 and fp16 are both inside fp32, not each other)."""
    return narrow == wide or wide == "float32"
