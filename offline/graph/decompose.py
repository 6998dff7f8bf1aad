"""Rewrite loss functions in a traced graph into the ops the partitioner fuses.

Runs on the shape-propagated graph (the caller propagates again afterwards). A loss is a per-element (or per-row) formula followed by a mean or a sum; spelled as one torch call
(`F.smooth_l1_loss`, `nn.TripletMarginLoss`, `F.cross_entropy` …) it is opaque to the partitioner.
This pass replaces each such call, before shapes are propagated, by the same computation in plain
ops: element-wise losses become `mean(F.<loss>(a, b, reduction='none'))` (one row kernel); the
triplet margin loss becomes two row norms and a mean; cross-entropy becomes a logsumexp row kernel,
a gather of the target logits (a torch call) and a mean that skips `ignore_index`. Settings a
rewrite does not cover (class weights, label smoothing, p-norms other than 2, swap) keep the call.
The CPU coverage check compares the rewritten graph's IR with the module's own output.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from kevolve.offline.graph.meta import node_shape
from torch import nn

_ELEMWISE = {F.smooth_l1_loss: "smooth_l1", F.huber_loss: "huber", F.mse_loss: "mse", F.l1_loss: "l1"}
_ELEM_MOD = {nn.SmoothL1Loss: "smooth_l1", nn.HuberLoss: "huber", nn.MSELoss: "mse", nn.L1Loss: "l1"}
_ELEM_ARGS = {"smooth_l1": ("input", "target", "size_average", "reduce", "reduction", "beta"),
              "huber": ("input", "target", "reduction", "delta"),
              "mse": ("input", "target", "size_average", "reduce", "reduction"),
              "l1": ("input", "target", "size_average", "reduce", "reduction")}
_ELEM_FN = {"smooth_l1": F.smooth_l1_loss, "huber": F.huber_loss, "mse": F.mse_loss, "l1": F.l1_loss}
_CE_ARGS = ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing")
_TRIPLET_ARGS = ("anchor", "positive", "negative", "margin", "p", "eps", "swap", "size_average", "reduce",
                 "reduction")


def _named(node: torch.fx.Node, names: tuple[str, ...]) -> dict[str, Any]:
    return dict(zip(names, node.args)) | dict(node.kwargs)


def _call(node: torch.fx.Node, gm: torch.fx.GraphModule) -> tuple[str, dict[str, Any]] | None:
    """(kind, its arguments) for a call node this pass rewrites, else None."""
    if node.op == "call_function":
        if node.target is torch.einsum and len(node.args) == 3 and isinstance(node.args[0], str) and not node.kwargs:
            return "einsum", {"equation": node.args[0], "a": node.args[1], "b": node.args[2]}
        if node.target is F.scaled_dot_product_attention:
            return "sdpa", _named(node, ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"))
        if node.target in _ELEMWISE:
            kind = _ELEMWISE[node.target]  # type: ignore[index]
            return kind, _named(node, _ELEM_ARGS[kind])
        if node.target is F.cross_entropy:
            return "cross_entropy", _named(node, _CE_ARGS)
        if node.target is F.triplet_margin_loss:
            return "triplet", _named(node, _TRIPLET_ARGS)
        return None
    if node.op != "call_module" or node.kwargs:
        return None
    mod = gm.get_submodule(str(node.target))
    if type(mod) in _ELEM_MOD:
        kind = _ELEM_MOD[type(mod)]
        extra = {"beta": getattr(mod, "beta", 1.0), "delta": getattr(mod, "delta", 1.0)}
        return kind, dict(zip(("input", "target"), node.args)) | {"reduction": mod.reduction} | extra
    if type(mod) is nn.CrossEntropyLoss:
        return "cross_entropy", dict(zip(("input", "target"), node.args)) | {
            "weight": mod.weight, "ignore_index": mod.ignore_index, "reduction": mod.reduction,
            "label_smoothing": mod.label_smoothing}
    if type(mod) is nn.TripletMarginLoss:
        return "triplet", dict(zip(("anchor", "positive", "negative"), node.args)) | {
            "margin": mod.margin, "p": mod.p, "eps": mod.eps, "swap": mod.swap, "reduction": mod.reduction}
    return None


def _reduce(g: torch.fx.Graph, x: torch.fx.Node, reduction: str) -> torch.fx.Node:
    return g.call_function(torch.mean if reduction == "mean" else torch.sum, (x,))


def _elementwise(g: torch.fx.Graph, kind: str, a: dict[str, Any]) -> torch.fx.Node | None:
    red = a.get("reduction", "mean")
    if red not in ("mean", "sum") or a.get("size_average") is not None or a.get("reduce") is not None:
        return None
    kw: dict[str, Any] = {"reduction": "none"}
    if kind == "smooth_l1":
        kw["beta"] = float(a.get("beta", 1.0))
    if kind == "huber":
        kw["delta"] = float(a.get("delta", 1.0))
    per = g.call_function(_ELEM_FN[kind], (a["input"], a["target"]), kw)
    return _reduce(g, per, red)


def _triplet(g: torch.fx.Graph, a: dict[str, Any]) -> torch.fx.Node | None:
    """mean(clamp_min(margin + |a - p + eps|_2 - |a - n + eps|_2, 0)) over the last dim's rows."""
    if float(a.get("p", 2.0)) != 2.0 or a.get("swap", False) or a.get("reduction", "mean") not in ("mean", "sum"):
        return None
    eps, margin = float(a.get("eps", 1e-6)), float(a.get("margin", 1.0))

    def dist(other: torch.fx.Node) -> torch.fx.Node:
        d = g.call_function(operator.add, (g.call_function(operator.sub, (a["anchor"], other)), eps))
        s = g.call_function(torch.sum, (g.call_function(operator.mul, (d, d)),), {"dim": -1})
        return g.call_function(torch.sqrt, (s,))

    gap = g.call_function(operator.sub, (g.call_function(operator.add, (dist(a["positive"]), margin)),
                                         dist(a["negative"])))
    return _reduce(g, g.call_function(torch.clamp, (gap,), {"min": 0.0}), a.get("reduction", "mean"))


def _cross_entropy(g: torch.fx.Graph, a: dict[str, Any]) -> torch.fx.Node | None:
    """(logsumexp(x) - x[target]) averaged over the targets that are not ignore_index (class dim 1)."""
    if a.get("weight") is not None or float(a.get("label_smoothing", 0.0)) != 0.0 or \
            a.get("reduction", "mean") not in ("mean", "sum") or a.get("size_average") is not None or \
            a.get("reduce") is not None:
        return None
    x, t = a["input"], a["target"]
    ignore = int(a.get("ignore_index", -100))
    valid = g.call_function(operator.ne, (t, ignore))
    safe = g.call_function(torch.where, (valid, t, 0))
    picked = g.call_method("squeeze", (g.call_function(torch.gather, (x, 1, g.call_method("unsqueeze", (safe, 1)))), 1))
    lse = g.call_function(torch.logsumexp, (x, 1))
    w = g.call_method("float", (valid,))
    total = g.call_function(torch.sum, (g.call_function(operator.mul, (g.call_function(operator.sub, (lse, picked)), w)),))
    if a.get("reduction", "mean") == "sum":
        return total
    return g.call_function(operator.truediv, (total, g.call_function(torch.sum, (w,))))


def _einsum(g: torch.fx.Graph, a: dict[str, Any]) -> torch.fx.Node | None:
    """A two-operand einsum that is a matrix product: '...l,lk->...k' (any leading letters on the
    left) or 'bij,bjk->bik' (batched), as torch.matmul (cuBLAS, or the generated GEMM when alone)."""
    eq = a["equation"].replace(" ", "")
    if "->" not in eq or "." in eq or eq.count(",") != 1:
        return None
    lhs, out = eq.split("->")
    x, y = lhs.split(",")
    if len(set(x)) != len(x) or len(set(y)) != len(y) or len(y) not in (2, 3):
        return None
    if len(y) == 2 and x[-1] == y[0] and out == x[:-1] + y[1] and y[1] not in x:
        return g.call_function(torch.matmul, (a["a"], a["b"]))
    if len(y) == 3 and len(x) == 3 and x[0] == y[0] and x[2] == y[1] and out == x[:2] + y[2] and y[2] not in x:
        return g.call_function(torch.matmul, (a["a"], a["b"]))
    return None


def _attention(g: torch.fx.Graph, a: dict[str, Any]) -> torch.fx.Node | None:
    """softmax(q @ k^T * scale) @ v for attention without mask, dropout or causality (fp32 math)."""
    if a.get("attn_mask") is not None or float(a.get("dropout_p", 0.0) or 0.0) != 0.0 or a.get("is_causal", False):
        return None
    q, k, v = a["query"], a["key"], a["value"]
    scale = a.get("scale")
    shape = node_shape(q) if isinstance(q, torch.fx.Node) else None
    if scale is None and shape:
        scale = 1.0 / math.sqrt(shape[-1])  # torch's default; the candidate's guard pins the shapes
    if not isinstance(scale, (int, float)):
        return None
    scores = g.call_function(torch.matmul, (q, g.call_method("transpose", (k, -2, -1))))
    scaled = g.call_function(operator.mul, (scores, float(scale)))
    attn = g.call_function(torch.softmax, (scaled,), {"dim": -1})
    return g.call_function(torch.matmul, (attn, v))


def decompose(gm: torch.fx.GraphModule) -> int:
    """Rewrite the loss calls of `gm` in place; returns how many were rewritten."""
    done = 0
    for node in list(gm.graph.nodes):
        found = _call(node, gm)
        if found is None:
            continue
        kind, args = found
        with gm.graph.inserting_before(node):
            if kind == "einsum":
                new = _einsum(gm.graph, args)
            elif kind == "sdpa":
                new = _attention(gm.graph, args)
            elif kind == "triplet":
                new = _triplet(gm.graph, args)
            elif kind == "cross_entropy":
                new = _cross_entropy(gm.graph, args)
            else:
                new = _elementwise(gm.graph, kind, args)
        if new is None:
            continue  # unsupported settings: the call stays (its inserted helpers, if any, are dead code)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        done += 1
    if done:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return done
