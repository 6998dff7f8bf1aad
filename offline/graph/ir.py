"""The offline proposer's intermediate representation: fused groups of element-wise and row ops.

A `Group` is one kernel. It iterates a logical shape `shape`; the dimensions in `reduce_dims` form a
*row* (all of them together), the others index rows. Expressions are small DAGs over leaves (input
tensors viewed with strides over the logical shape, 0 where broadcast), constants, and row
statistics (`Stat`), so that softmax, log-softmax, layer/RMS/group/batch norm, logsumexp and plain
reductions are all sequences of reductions followed by an element-wise or per-row output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Scope of a value: one per element of the logical shape, or one per row.
ELEM, ROW = "elem", "row"


@dataclass(frozen=True)
class Leaf:
    """An input tensor read with `strides` (elements) over the group's logical shape."""

    index: int


@dataclass(frozen=True)
class Const:
    """A float constant."""

    value: float


@dataclass(frozen=True)
class Stat:
    """The result of the group's `index`-th reduction (one value per row)."""

    index: int


@dataclass(frozen=True)
class Op:
    """An element-wise op from the op table applied to argument expressions."""

    name: str
    args: tuple[Expr, ...]
    params: tuple[float, ...] = ()


Expr = Leaf | Const | Stat | Op


@dataclass(frozen=True)
class Reduction:
    """`combine` (sum, max, min, prod) of `expr` over each row."""

    combine: str
    expr: Expr


@dataclass(frozen=True)
class LeafSpec:
    """Where a leaf comes from: the Python expression naming the tensor in the generated forward."""

    name: str
    strides: tuple[int, ...]
    scalar: bool = False
    """a Python number passed to forward (strides all 0): the launcher makes it a 0-d fp32 tensor"""
    dtype: str = "float32"
    """its storage dtype ('float32', 'bfloat16', 'float16': `dtypes.py`); loads widen it to fp32"""


@dataclass
class Group:
    """One fused kernel: reads `leaves`, computes `reductions` in order, writes `out`."""

    shape: tuple[int, ...]
    reduce_dims: tuple[int, ...]
    leaves: list[LeafSpec]
    reductions: list[Reduction]
    out: Expr
    out_scope: str
    out_shape: tuple[int, ...]
    nodes: list[str] = field(default_factory=list)
    kind: str = "fused"
    """'fused' (element-wise / row kernel), 'gemm' (a generated matrix product, see gemm.py) or a direct
    kernel's kind ('conv', 'pool', 'scan', 'argreduce': see direct.py)"""
    gemm: object = None
    """the product's GemmShape when kind is 'gemm'"""
    spec: object = None
    """a direct kernel's spec (its kind's frozen dataclass of sizes and settings)"""
    out_dtype: str = "float32"
    """the output's storage: 'float32', 'bfloat16' or 'float16' (fused groups: the fp32 result rounded to
    nearest even), or 'int64' for index outputs (argmax / argmin)"""

    @property
    def kept_dims(self) -> tuple[int, ...]:
        return tuple(d for d in range(len(self.shape)) if d not in self.reduce_dims)

    @property
    def rows(self) -> int:
        return math.prod(self.shape[d] for d in self.kept_dims)

    @property
    def row_len(self) -> int:
        return math.prod(self.shape[d] for d in self.reduce_dims)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_pointwise(self) -> bool:
        return self.kind == "fused" and not self.reductions and self.out_scope == ELEM

    def describe(self) -> str:
        """One line for logs and source headers."""
        if self.kind == "gemm":
            return f"gemm {self.gemm}"
        if self.kind != "fused":
            return f"{self.kind} {self.spec}"
        kind = "pointwise" if self.is_pointwise else f"row[{len(self.reductions)} reductions, out={self.out_scope}]"
        return f"{kind} shape={list(self.shape)} reduce={list(self.reduce_dims)} ops={len(self.nodes)}"


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides of `shape` (in elements)."""
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def walk(expr: Expr) -> list[Expr]:
    """Every sub-expression once, children before parents (a topological order)."""
    seen: dict[Expr, None] = {}

    def visit(e: Expr) -> None:
        if e in seen:
            return
        if isinstance(e, Op):
            for a in e.args:
                visit(a)
        seen[e] = None

    visit(expr)
    return list(seen)


def scope_of(expr: Expr, group: Group) -> str:
    """ELEM if the expression reads a leaf that varies along the row, else ROW."""
    for e in walk(expr):
        if isinstance(e, Leaf) and any(group.leaves[e.index].strides[d] for d in group.reduce_dims):
            return ELEM
    return ROW
