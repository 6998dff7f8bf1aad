"""Element-wise op table: each op as CUDA C (fp32) and as the equivalent torch call.

The CUDA text is what generated kernels compute; the torch twin lets CPU tests check that the IR
built from a module computes what the module computes (`interpret.py`). Both follow PyTorch's
definitions (erf GELU, softplus threshold, SELU constants) so that results agree to fp32 rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


@dataclass(frozen=True)
class OpDef:
    """`cuda` is a format string over {0}, {1}, … (arguments) and {p0}, {p1}, … (float params)."""

    arity: int
    cuda: str
    torch_fn: Callable[..., torch.Tensor]


def _softplus(x: torch.Tensor, beta: float, thr: float) -> torch.Tensor:
    return torch.nn.functional.softplus(x, beta, thr)


OPS: dict[str, OpDef] = {
    "add": OpDef(2, "({0} + {1})", torch.add),
    "sub": OpDef(2, "({0} - {1})", torch.sub),
    "mul": OpDef(2, "({0} * {1})", torch.mul),
    "div": OpDef(2, "({0} / {1})", torch.div),
    "maximum": OpDef(2, "fmaxf({0}, {1})", torch.maximum),
    "minimum": OpDef(2, "fminf({0}, {1})", torch.minimum),
    "pow": OpDef(2, "powf({0}, {1})", torch.pow),
    "neg": OpDef(1, "(-{0})", torch.neg),
    "relu": OpDef(1, "fmaxf({0}, 0.0f)", torch.relu),
    "sigmoid": OpDef(1, "(1.0f / (1.0f + expf(-{0})))", torch.sigmoid),
    "tanh": OpDef(1, "tanhf({0})", torch.tanh),
    "exp": OpDef(1, "expf({0})", torch.exp),
    "log": OpDef(1, "logf({0})", torch.log),
    "log1p": OpDef(1, "log1pf({0})", torch.log1p),
    "sqrt": OpDef(1, "sqrtf({0})", torch.sqrt),
    "rsqrt": OpDef(1, "rsqrtf({0})", torch.rsqrt),
    "abs": OpDef(1, "fabsf({0})", torch.abs),
    "erf": OpDef(1, "erff({0})", torch.erf),
    "sin": OpDef(1, "sinf({0})", torch.sin),
    "cos": OpDef(1, "cosf({0})", torch.cos),
    "square": OpDef(1, "({0} * {0})", torch.square),
    "reciprocal": OpDef(1, "(1.0f / {0})", torch.reciprocal),
    "sign": OpDef(1, "(({0} > 0.0f) - ({0} < 0.0f))", torch.sign),
    "gelu": OpDef(1, "(0.5f * {0} * (1.0f + erff({0} * 0.70710678118654752f)))",
                  lambda x: torch.nn.functional.gelu(x)),
    "gelu_tanh": OpDef(1, "(0.5f * {0} * (1.0f + tanhf(0.7978845608028654f * ({0} + 0.044715f * {0} * {0} * {0}))))",
                       lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    "silu": OpDef(1, "({0} / (1.0f + expf(-{0})))", torch.nn.functional.silu),
    "mish": OpDef(1, "({0} * tanhf({0} > 20.0f ? {0} : log1pf(expf({0}))))", torch.nn.functional.mish),
    "softsign": OpDef(1, "({0} / (1.0f + fabsf({0})))", torch.nn.functional.softsign),
    "hardsigmoid": OpDef(1, "fminf(fmaxf({0} / 6.0f + 0.5f, 0.0f), 1.0f)", torch.nn.functional.hardsigmoid),
    "hardswish": OpDef(1, "({0} * fminf(fmaxf({0} + 3.0f, 0.0f), 6.0f) / 6.0f)", torch.nn.functional.hardswish),
    "selu": OpDef(1, f"({SELU_SCALE}f * ({{0}} > 0.0f ? {{0}} : {SELU_ALPHA}f * expm1f({{0}})))",
                  torch.nn.functional.selu),
    # parameterized: p0, p1 … are floats fixed at generation time
    "leaky_relu": OpDef(1, "({0} > 0.0f ? {0} : {0} * {p0})", lambda x, s: torch.nn.functional.leaky_relu(x, s)),
    "elu": OpDef(1, "({0} > 0.0f ? {0} : {p0} * expm1f({0}))", lambda x, a: torch.nn.functional.elu(x, a)),
    "clamp": OpDef(1, "fminf(fmaxf({0}, {p0}), {p1})", lambda x, lo, hi: torch.clamp(x, lo, hi)),
    "clamp_min": OpDef(1, "fmaxf({0}, {p0})", lambda x, lo: torch.clamp(x, min=lo)),
    "clamp_max": OpDef(1, "fminf({0}, {p0})", lambda x, hi: torch.clamp(x, max=hi)),
    "softplus": OpDef(1, "({0} * {p0} > {p1} ? {0} : log1pf(expf({0} * {p0})) / {p0})", _softplus),
    "powc": OpDef(1, "powf({0}, {p0})", lambda x, e: torch.pow(x, e)),
    # per-element losses (reduction='none'); their mean / sum is the group's reduction
    "smooth_l1": OpDef(2, "(fabsf({0} - {1}) < {p0} ? 0.5f * ({0} - {1}) * ({0} - {1}) / {p0} : fabsf({0} - {1}) - 0.5f * {p0})",
                       lambda a, b, beta: torch.nn.functional.smooth_l1_loss(a, b, reduction="none", beta=beta)),
    "huber": OpDef(2, "(fabsf({0} - {1}) < {p0} ? 0.5f * ({0} - {1}) * ({0} - {1}) : {p0} * (fabsf({0} - {1}) - 0.5f * {p0}))",
                   lambda a, b, delta: torch.nn.functional.huber_loss(a, b, reduction="none", delta=delta)),
    "sqdiff": OpDef(2, "(({0} - {1}) * ({0} - {1}))", lambda a, b: torch.nn.functional.mse_loss(a, b, reduction="none")),
    "absdiff": OpDef(2, "fabsf({0} - {1})", lambda a, b: torch.nn.functional.l1_loss(a, b, reduction="none")),
    # a value PyTorch stored in 16 bits, read by a wider op (type promotion): rounded to nearest even, widened
    "round_bf16": OpDef(1, "kv_bf16_f32(kv_f32_bf16({0}))", lambda x: x.to(torch.bfloat16).to(x.dtype)),
    "round_fp16": OpDef(1, "kv_f16_f32(kv_f32_f16({0}))", lambda x: x.to(torch.float16).to(x.dtype)),
}

COMBINE = {"sum": ("0.0f", "({0} + {1})"), "max": ("-INFINITY", "fmaxf({0}, {1})"),
           "min": ("INFINITY", "fminf({0}, {1})"), "prod": ("1.0f", "({0} * {1})")}


def cuda_float(v: float) -> str:
    """A float literal NVRTC accepts (inf and nan included)."""
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    text = f"{float(v)!r}f"
    return f"({text})" if v < 0 else text


def cuda_call(name: str, args: list[str], params: tuple[float, ...]) -> str:
    """The CUDA expression for one op."""
    d = OPS[name]
    return d.cuda.format(*args, **{f"p{i}": cuda_float(p) for i, p in enumerate(params)})


def torch_call(name: str, args: list[torch.Tensor], params: tuple[float, ...]) -> torch.Tensor:
    """The torch equivalent of one op (for CPU checks of the IR)."""
    return OPS[name].torch_fn(*args, *params)
