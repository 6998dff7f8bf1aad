"""Canonical forms of fx nodes: the many spellings of one op (torch.relu, F.relu, x.relu(),
nn.ReLU, …) become one `Canon` the group builder understands; anything else stays a torch call.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from kevolve.offline.graph.ops import OPS
from torch import nn

PW, REDUCE, COMPOSITE, ALIAS = "pw", "reduce", "composite", "alias"


@dataclass
class Canon:
    """`inputs` are fx nodes or Python numbers; `params` hold op settings (dims, eps, slopes …)."""

    kind: str
    op: str
    inputs: list[Any]
    params: dict[str, Any] = field(default_factory=dict)


_BINARY = {operator.add: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub", operator.mul: "mul",
           torch.mul: "mul", operator.truediv: "div", torch.div: "div", torch.maximum: "maximum",
           torch.minimum: "minimum", operator.pow: "pow", torch.pow: "pow"}
_UNARY_FN = {operator.neg: "neg", torch.neg: "neg", torch.relu: "relu", F.relu: "relu", torch.sigmoid: "sigmoid",
             F.sigmoid: "sigmoid", torch.tanh: "tanh", F.tanh: "tanh", torch.exp: "exp", torch.log: "log",
             torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.abs: "abs", torch.erf: "erf", torch.log1p: "log1p",
             torch.sin: "sin", torch.cos: "cos", torch.square: "square", torch.reciprocal: "reciprocal",
             torch.sign: "sign", F.silu: "silu", F.mish: "mish", F.softsign: "softsign", F.hardsigmoid: "hardsigmoid",
             F.hardswish: "hardswish", F.selu: "selu", torch.selu: "selu"}
_METHOD_UNARY = {"neg", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "erf", "log1p", "sin",
                 "cos", "square", "reciprocal", "sign"}
_METHOD_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow", "maximum": "maximum",
                  "minimum": "minimum", "__add__": "add", "__mul__": "mul"}
_MODULE_UNARY = {nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu", nn.Mish: "mish",
                 nn.Softsign: "softsign", nn.Hardsigmoid: "hardsigmoid", nn.Hardswish: "hardswish", nn.SELU: "selu"}
_LOSS_NONE = {F.smooth_l1_loss: "smooth_l1", F.huber_loss: "huber", F.mse_loss: "sqdiff", F.l1_loss: "absdiff"}
_REDUCE_FN = {torch.sum: "sum", torch.mean: "mean", torch.amax: "max", torch.amin: "min", torch.prod: "prod"}
_REDUCE_METHOD = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min", "prod": "prod"}


def _get(node: torch.fx.Node, i: int, name: str, default: Any = None) -> Any:
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _module(gm: torch.fx.GraphModule, node: torch.fx.Node) -> nn.Module:
    return gm.get_submodule(str(node.target))


def _is_tensor_or_num(v: Any) -> bool:
    return isinstance(v, (torch.fx.Node, int, float)) and not isinstance(v, bool)


def _activation(name: str, x: Any, **params: Any) -> Canon:
    return Canon(PW, name, [x], params)


def _minmax(node: torch.fx.Node, op: str) -> Canon | None:
    """torch.max(x, y) is element-wise; torch.max(x, dim) returns (values, indices)."""
    other = _get(node, 1, "other" if "other" in node.kwargs else "dim")
    if isinstance(other, torch.fx.Node):
        return Canon(PW, "maximum" if op == "max" else "minimum", [node.args[0], other])
    if other is None:
        return Canon(REDUCE, op, [node.args[0]], {"dim": None, "keepdim": False})
    return None  # the (values, indices) form: handled through getitem


def canonicalize(node: torch.fx.Node, gm: torch.fx.GraphModule) -> Canon | None:
    """The canonical form of `node`, or None if it stays a torch call."""
    if node.op == "call_function":
        return _function(node)
    if node.op == "call_method":
        return _method(node)
    if node.op == "call_module":
        return _module_call(node, _module(gm, node))
    return None


def _function(node: torch.fx.Node) -> Canon | None:
    t, a = node.target, node.args
    if t in _BINARY and len(a) == 2 and not node.kwargs and all(_is_tensor_or_num(v) for v in a):
        if t is torch.div and node.kwargs.get("rounding_mode"):
            return None
        return Canon(PW, _BINARY[t], list(a))
    if t in _UNARY_FN and len(a) == 1 and not {k for k in node.kwargs if k != "inplace"}:
        return _activation(_UNARY_FN[t], a[0])
    if t is F.gelu:
        return _activation("gelu_tanh" if node.kwargs.get("approximate", "none") == "tanh" else "gelu", a[0])
    if t is F.leaky_relu:
        return _activation("leaky_relu", a[0], p=(float(_get(node, 1, "negative_slope", 0.01)),))
    if t is F.elu:
        return _activation("elu", a[0], p=(float(_get(node, 1, "alpha", 1.0)),))
    if t is F.hardtanh:
        return _activation("clamp", a[0], p=(float(_get(node, 1, "min_val", -1.0)), float(_get(node, 2, "max_val", 1.0))))
    if t is F.softplus:
        return _activation("softplus", a[0], p=(float(_get(node, 1, "beta", 1.0)), float(_get(node, 2, "threshold", 20.0))))
    if t in (torch.clamp, torch.clip):
        return _clamp(a[0], _get(node, 1, "min"), _get(node, 2, "max"))
    if t in (torch.max, torch.min):
        return _minmax(node, "max" if t is torch.max else "min")
    if t in _REDUCE_FN:
        return _reduce(_REDUCE_FN[t], a[0], _get(node, 1, "dim"), _get(node, 2, "keepdim", False))
    if t is operator.getitem:
        return _getitem(node)
    if t in (torch.softmax, F.softmax, torch.log_softmax, F.log_softmax):
        op = "softmax" if t in (torch.softmax, F.softmax) else "log_softmax"
        return Canon(COMPOSITE, op, [a[0]], {"dim": _get(node, 1, "dim")})
    if t is torch.logsumexp:
        return Canon(COMPOSITE, "logsumexp", [a[0]], {"dim": _get(node, 1, "dim"), "keepdim": _get(node, 2, "keepdim", False)})
    if t is F.layer_norm:
        return _layer_norm(a[0], _get(node, 1, "normalized_shape"), _get(node, 2, "weight"), _get(node, 3, "bias"),
                           _get(node, 4, "eps", 1e-5))
    if t is F.group_norm:
        return Canon(COMPOSITE, "group_norm", [a[0], _get(node, 2, "weight"), _get(node, 3, "bias")],
                     {"groups": int(_get(node, 1, "num_groups")), "eps": float(_get(node, 4, "eps", 1e-5))})
    if t in _ADAPTIVE_AVG and _all_ones(_get(node, 1, "output_size")):
        return _global_avg(a[0], _ADAPTIVE_AVG[t])
    if t in _LOSS_NONE and node.kwargs.get("reduction") == "none" and len(a) == 2:
        op = _LOSS_NONE[t]
        p = {"smooth_l1": ("beta", 1.0), "huber": ("delta", 1.0)}.get(op)
        return Canon(PW, op, list(a), {"p": (float(node.kwargs.get(p[0], p[1])),)} if p else {})
    if t is F.dropout and (not _get(node, 2, "training", True) or float(_get(node, 1, "p", 0.5)) == 0.0):
        return Canon(ALIAS, "dropout", [a[0]])
    return None


def _method(node: torch.fx.Node) -> Canon | None:
    m, a = str(node.target), node.args
    if m in _METHOD_UNARY and len(a) == 1:
        return _activation(m, a[0])
    if m in _METHOD_BINARY and len(a) == 2 and _is_tensor_or_num(a[1]) and not node.kwargs:
        return Canon(PW, _METHOD_BINARY[m], list(a))
    if m in ("clamp", "clip"):
        return _clamp(a[0], _get(node, 1, "min"), _get(node, 2, "max"))
    if m in _REDUCE_METHOD:
        return _reduce(_REDUCE_METHOD[m], a[0], _get(node, 1, "dim"), _get(node, 2, "keepdim", False))
    if m in ("max", "min"):
        return _minmax(node, m)
    if m in ("softmax", "log_softmax"):
        return Canon(COMPOSITE, m, [a[0]], {"dim": _get(node, 1, "dim")})
    if m == "logsumexp":
        return Canon(COMPOSITE, "logsumexp", [a[0]], {"dim": _get(node, 1, "dim"), "keepdim": _get(node, 2, "keepdim", False)})
    if m in ("clone", "detach", "contiguous") and len(a) == 1 and not node.kwargs:
        return Canon(ALIAS, m, [a[0]])
    return None


def _module_call(node: torch.fx.Node, mod: nn.Module) -> Canon | None:
    x = node.args[0] if node.args else None
    if len(node.args) != 1 or node.kwargs:
        return None
    for cls, name in _MODULE_UNARY.items():
        if type(mod) is cls:
            return _activation(name, x)
    if isinstance(mod, nn.GELU):
        return _activation("gelu_tanh" if mod.approximate == "tanh" else "gelu", x)
    if isinstance(mod, nn.LeakyReLU):
        return _activation("leaky_relu", x, p=(float(mod.negative_slope),))
    if isinstance(mod, nn.ELU):
        return _activation("elu", x, p=(float(mod.alpha),))
    if isinstance(mod, nn.Hardtanh):  # also ReLU6
        return _activation("clamp", x, p=(float(mod.min_val), float(mod.max_val)))
    if isinstance(mod, nn.Softplus):
        return _activation("softplus", x, p=(float(mod.beta), float(mod.threshold)))
    if isinstance(mod, (nn.Softmax, nn.LogSoftmax)):
        return Canon(COMPOSITE, "softmax" if isinstance(mod, nn.Softmax) else "log_softmax", [x], {"dim": mod.dim})
    if isinstance(mod, nn.LayerNorm):
        return _layer_norm(x, mod.normalized_shape, _attr(node, "weight", mod), _attr(node, "bias", mod), mod.eps)
    if isinstance(mod, nn.GroupNorm):
        return Canon(COMPOSITE, "group_norm", [x, _attr(node, "weight", mod), _attr(node, "bias", mod)],
                     {"groups": mod.num_groups, "eps": mod.eps})
    bn = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
    if isinstance(mod, bn) and not mod.training and mod.track_running_stats:
        return Canon(PW, "batch_norm_eval", [x, _attr(node, "running_mean", mod), _attr(node, "running_var", mod),
                                            _attr(node, "weight", mod), _attr(node, "bias", mod)], {"eps": mod.eps})
    if isinstance(mod, bn) and mod.training:
        return Canon(COMPOSITE, "batch_norm", [x, _attr(node, "weight", mod), _attr(node, "bias", mod)],
                     {"eps": mod.eps, "guard": f"{node.target}"})
    if isinstance(mod, (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)) and \
            (mod.training or not mod.track_running_stats):
        return Canon(COMPOSITE, "instance_norm", [x, _attr(node, "weight", mod), _attr(node, "bias", mod)],
                     {"eps": mod.eps})
    if isinstance(mod, nn.Dropout) and (mod.p == 0.0 or not mod.training):
        return Canon(ALIAS, "dropout", [x])
    for cls, nd in _ADAPTIVE_AVG_MOD.items():
        if isinstance(mod, cls) and _all_ones(mod.output_size):
            return _global_avg(x, nd)
    if isinstance(mod, nn.Identity):
        return Canon(ALIAS, "identity", [x])
    return None


_ADAPTIVE_AVG = {F.adaptive_avg_pool1d: 1, F.adaptive_avg_pool2d: 2, F.adaptive_avg_pool3d: 3}
_ADAPTIVE_AVG_MOD = {nn.AdaptiveAvgPool1d: 1, nn.AdaptiveAvgPool2d: 2, nn.AdaptiveAvgPool3d: 3}


def _all_ones(size: Any) -> bool:
    sizes = size if isinstance(size, (tuple, list)) else (size,)
    return all(s == 1 for s in sizes)


def _global_avg(x: Any, nd: int) -> Canon:
    """Adaptive average pooling to size 1 is a mean over the last `nd` dims, kept as size 1."""
    return Canon(REDUCE, "mean", [x], {"dim": tuple(range(-nd, 0)), "keepdim": True})


class ParamRef:
    """A parameter of a module called in the graph, named by its attribute path (e.g. 'norm.weight')."""

    def __init__(self, path: str, shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> None:
        self.path, self.shape, self.dtype = path, shape, dtype

    def __repr__(self) -> str:
        return f"ParamRef({self.path!r})"


def _attr(node: torch.fx.Node, name: str, mod: nn.Module) -> ParamRef | None:
    t = getattr(mod, name, None)
    return None if t is None else ParamRef(f"{node.target}.{name}", tuple(t.shape), t.dtype)


def _clamp(x: Any, lo: Any, hi: Any) -> Canon | None:
    if isinstance(lo, torch.fx.Node) or isinstance(hi, torch.fx.Node):
        return None
    if lo is not None and hi is not None:
        return _activation("clamp", x, p=(float(lo), float(hi)))
    if lo is not None:
        return _activation("clamp_min", x, p=(float(lo),))
    if hi is not None:
        return _activation("clamp_max", x, p=(float(hi),))
    return None


def _reduce(op: str, x: Any, dim: Any, keepdim: Any) -> Canon | None:
    if not isinstance(keepdim, bool) or isinstance(dim, torch.fx.Node):
        return None
    return Canon(REDUCE, op, [x], {"dim": dim, "keepdim": keepdim})


def _getitem(node: torch.fx.Node) -> Canon | None:
    """`torch.max(x, dim)[0]` (values of a min/max over a dim) is a reduction."""
    src, idx = node.args
    if idx != 0 or not isinstance(src, torch.fx.Node):
        return None
    is_fn = src.op == "call_function" and src.target in (torch.max, torch.min)
    is_m = src.op == "call_method" and src.target in ("max", "min")
    if not (is_fn or is_m) or any(u.args[1:] != (0,) for u in src.users):
        return None
    dim = _get(src, 1, "dim")
    if not isinstance(dim, int):
        return None
    op = "max" if (src.target is torch.max or src.target == "max") else "min"
    return Canon(REDUCE, op, [src.args[0]], {"dim": dim, "keepdim": _get(src, 2, "keepdim", False), "via": src})


def _layer_norm(x: Any, shape: Any, w: Any, b: Any, eps: Any) -> Canon:
    n = len(shape) if isinstance(shape, (list, tuple)) else 1
    return Canon(COMPOSITE, "layer_norm", [x, w, b], {"ndims": n, "eps": float(eps)})


assert all(v in OPS for v in list(_BINARY.values()) + list(_UNARY_FN.values()) + list(_MODULE_UNARY.values()))
