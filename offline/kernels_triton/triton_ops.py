"""Element-wise ops as Triton expressions, for epilogues fused into generated Triton kernels.

The twin of the CUDA table in `ops.py` (same names, same PyTorch definitions), written with the
primitives Triton's CPU interpreter also runs (`tl.exp`, `tl.log`, `tl.math.erf`, `tl.sigmoid` …;
no libdevice calls), so CPU tests can execute every epilogue. `tanh` is `2·sigmoid(2x) − 1`, whose
absolute error (about 1e-7) is far inside the evaluator's normwise tolerance. Ops missing here
(`pow` with a tensor exponent, `powc`) keep their group out of Triton fusion.
"""

from __future__ import annotations

import math

from kevolve.offline.graph.ir import Const, Expr, Group, Leaf, Op, walk
from kevolve.offline.graph.ops import SELU_ALPHA, SELU_SCALE

_TANH = "(2.0 * tl.sigmoid(2.0 * {0}) - 1.0)"

TRITON_OPS: dict[str, str] = {
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
    "maximum": "tl.maximum({0}, {1})",
    "minimum": "tl.minimum({0}, {1})",
    "neg": "(-{0})",
    "relu": "tl.maximum({0}, 0.0)",
    "sigmoid": "tl.sigmoid({0})",
    "tanh": _TANH,
    "exp": "tl.exp({0})",
    "log": "tl.log({0})",
    "log1p": "tl.log(1.0 + {0})",
    "sqrt": "tl.sqrt({0})",
    "rsqrt": "tl.math.rsqrt({0})",
    "abs": "tl.abs({0})",
    "erf": "tl.math.erf({0})",
    "sin": "tl.sin({0})",
    "cos": "tl.cos({0})",
    "square": "({0} * {0})",
    "reciprocal": "(1.0 / {0})",
    "sign": "(tl.where({0} > 0.0, 1.0, 0.0) - tl.where({0} < 0.0, 1.0, 0.0))",
    "gelu": "(0.5 * {0} * (1.0 + tl.math.erf({0} * 0.7071067811865476)))",
    "gelu_tanh": "(0.5 * {0} * (1.0 + " + _TANH.format("(0.7978845608028654 * ({0} + 0.044715 * {0} * {0} * {0}))") + "))",
    "silu": "({0} * tl.sigmoid({0}))",
    "mish": "({0} * " + _TANH.format("tl.where({0} > 20.0, {0}, tl.log(1.0 + tl.exp(tl.minimum({0}, 20.0))))") + ")",
    "softsign": "({0} / (1.0 + tl.abs({0})))",
    "hardsigmoid": "tl.minimum(tl.maximum({0} / 6.0 + 0.5, 0.0), 1.0)",
    "hardswish": "({0} * tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0)",
    "selu": f"({SELU_SCALE!r} * tl.where({{0}} > 0.0, {{0}}, {SELU_ALPHA!r} * (tl.exp(tl.minimum({{0}}, 0.0)) - 1.0)))",
    "leaky_relu": "tl.where({0} > 0.0, {0}, {0} * {p0})",
    "elu": "tl.where({0} > 0.0, {0}, {p0} * (tl.exp(tl.minimum({0}, 0.0)) - 1.0))",
    "clamp": "tl.minimum(tl.maximum({0}, {p0}), {p1})",
    "clamp_min": "tl.maximum({0}, {p0})",
    "clamp_max": "tl.minimum({0}, {p0})",
    "softplus": "tl.where({0} * {p0} > {p1}, {0}, tl.log(1.0 + tl.exp(tl.minimum({0} * {p0}, {p1}))) / {p0})",
    "smooth_l1": ("tl.where(tl.abs({0} - {1}) < {p0}, 0.5 * ({0} - {1}) * ({0} - {1}) / {p0}, "
                  "tl.abs({0} - {1}) - 0.5 * {p0})"),
    "huber": ("tl.where(tl.abs({0} - {1}) < {p0}, 0.5 * ({0} - {1}) * ({0} - {1}), "
              "{p0} * (tl.abs({0} - {1}) - 0.5 * {p0}))"),
    "sqdiff": "(({0} - {1}) * ({0} - {1}))",
    "absdiff": "tl.abs({0} - {1})",
}


class NotTritonable(ValueError):
    """The expression uses an op or constant the Triton table does not have."""


def triton_float(v: float) -> str:
    """A finite float literal for Triton source (non-finite constants are refused)."""
    if not math.isfinite(v):
        raise NotTritonable(f"constant {v}")
    text = repr(float(v))
    return f"({text})" if v < 0 else text


def supported(e: Expr) -> bool:
    """True if every op and constant of `e` has a Triton form."""
    for sub in walk(e):
        if isinstance(sub, Op) and sub.name not in TRITON_OPS:
            return False
        if isinstance(sub, Const) and not math.isfinite(sub.value):
            return False
        if isinstance(sub, Op) and not all(math.isfinite(p) for p in sub.params):
            return False
    return True


def fp32_only(g: Group) -> bool:
    """Whether a group reads and writes float32 only: the Triton kernels' epilogues load and store fp32 (a bf16
    or fp16 group stays a CUDA kernel after the library product)."""
    return g.out_dtype == "float32" and all(leaf.dtype == "float32" for leaf in g.leaves)


def emit(e: Expr, leaf: dict[int, str], tag: str) -> tuple[list[str], str]:
    """Assignment lines computing `e` (leaves named by `leaf`) and the name holding the result."""
    names: dict[Expr, str] = {}
    lines: list[str] = []
    for sub in walk(e):
        if isinstance(sub, Leaf):
            names[sub] = leaf[sub.index]
        elif isinstance(sub, Const):
            names[sub] = triton_float(sub.value)
        elif isinstance(sub, Op):
            if sub.name not in TRITON_OPS:
                raise NotTritonable(sub.name)
            args = [names[a] for a in sub.args]
            params = {f"p{i}": triton_float(p) for i, p in enumerate(sub.params)}
            name = f"{tag}{len(lines)}"
            lines.append(f"{name} = {TRITON_OPS[sub.name].format(*args, **params)}")
            names[sub] = name
        else:
            raise NotTritonable(type(sub).__name__)
    return lines, names[e]
