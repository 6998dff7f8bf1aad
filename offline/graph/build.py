"""Build one `Group` (the IR of one kernel) from a set of fx nodes ending in a sink node.

Raises `Unfusable` when the nodes do not form one kernel (reductions over different dimensions,
shapes that do not broadcast, tensors of a dtype no group stores, mixed dtypes PyTorch would round
differently: `dtypes.py`); the partitioner then leaves them apart.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx
from kevolve.offline.graph.canon import ALIAS, COMPOSITE, PW, REDUCE, Canon, ParamRef
from kevolve.offline.graph.dtypes import ROUND_OP, name_of, widens_exactly
from kevolve.offline.graph.ir import (
    ELEM,
    ROW,
    Const,
    Expr,
    Group,
    Leaf,
    LeafSpec,
    Op,
    Reduction,
    Stat,
    scope_of,
)
from kevolve.offline.graph.meta import node_dtype, node_shape


class Unfusable(ValueError):
    """These nodes cannot be one kernel."""


def _dims(dim: Any, rank: int) -> tuple[int, ...]:
    if dim is None:
        return tuple(range(rank))
    ds = dim if isinstance(dim, (list, tuple)) else [dim]
    if not all(isinstance(d, int) for d in ds):
        raise Unfusable("dynamic reduction dims")
    return tuple(sorted({d % rank if rank else 0 for d in ds}))


def _reduction_dims(c: Canon, shape: tuple[int, ...]) -> tuple[tuple[int, ...], int | None]:
    """(dims reduced, in the input's dims) and the group count for group_norm."""
    r = len(shape)
    if c.kind == REDUCE or c.op == "logsumexp":
        return _dims(c.params["dim"], r), None
    if c.op in ("softmax", "log_softmax"):
        if c.params["dim"] is None:
            raise Unfusable("softmax without dim")
        return _dims(c.params["dim"], r), None
    if c.op == "layer_norm":
        return tuple(range(r - c.params["ndims"], r)), None
    if c.op == "batch_norm":
        return tuple(d for d in range(r) if d != 1), None
    if c.op == "instance_norm":
        return tuple(range(2, r)), None
    if c.op == "group_norm":
        if r < 2 or shape[1] % c.params["groups"]:
            raise Unfusable("group_norm shape")
        return tuple(range(1, r)), c.params["groups"]
    raise Unfusable(c.op)


class _Builder:
    def __init__(self, nodes: list[torch.fx.Node], sink: torch.fx.Node, canon: dict[torch.fx.Node, Canon]) -> None:
        self.nodes, self.sink, self.canon = nodes, sink, canon
        self.members = set(nodes)
        self.leaves: list[LeafSpec] = []
        self.leaf_refs: list[Any] = []
        self.reductions: list[Reduction] = []
        self.memo: dict[torch.fx.Node, tuple[Expr, tuple[int, ...]]] = {}
        self._frame()

    # -- the logical shape -------------------------------------------------------------------
    def _frame(self) -> None:
        shapes, dsets, groups = set(), set(), set()
        for n in self.nodes:
            c = self.canon[n]
            if c.kind in (REDUCE, COMPOSITE):
                x = c.inputs[0]
                s = node_shape(x) if isinstance(x, torch.fx.Node) else None
                if s is None:
                    raise Unfusable("reduction of a non-tensor")
                dims, g = _reduction_dims(c, s)
                shapes.add(s)
                groups.add(g)
                dsets.add(dims if g is None else ("group",))
        if len(shapes) > 1:
            raise Unfusable("reductions of different shapes")
        self.S = shapes.pop() if shapes else node_shape(self.sink)
        if self.S is None:
            raise Unfusable("sink is not a tensor")
        groups.discard(None)
        if len(groups) > 1:
            raise Unfusable("group_norms with different group counts")
        self.G = groups.pop() if groups else None
        r = len(self.S)
        if self.G is not None:
            self.L = (*self.S[:1], self.G, self.S[1] // self.G, *self.S[2:])
            mapped = {tuple(range(2, r + 1)) if d == ("group",) else
                      tuple(sorted({x for dd in d for x in ((1, 2) if dd == 1 else (dd if dd < 1 else dd + 1,))}))
                      for d in dsets}
        else:
            self.L = self.S
            mapped = set(dsets)
        if len(mapped) > 1:
            raise Unfusable("reductions over different dims")
        self.D = mapped.pop() if mapped else ()
        # S dims all of whose logical dims are reduced (a group_norm's channel dim is not)
        self.D_S = tuple(d for d in range(r) if (self.G is None and d in self.D) or
                         (self.G is not None and d != 1 and (d + 1 if d > 1 else d) in self.D))
        self.K = math.prod(self.L[d] for d in self.D)

    def _to_l(self, s_strides: tuple[int, ...]) -> tuple[int, ...]:
        if self.G is None:
            return s_strides
        cg = self.S[1] // self.G
        return (*s_strides[:1], s_strides[1] * cg, s_strides[1], *s_strides[2:])

    # -- values -------------------------------------------------------------------------------
    def leaf(self, ref: Any, shape: tuple[int, ...], where: tuple[int, ...], ctx_shape: tuple[int, ...],
             dtype: str = "float32") -> Leaf:
        """A tensor of `shape` (stored as `dtype`) broadcast (right-aligned) against a value of `ctx_shape`
        placed on S dims `where`."""
        if len(shape) > len(ctx_shape):
            raise Unfusable("operand has more dims than its result")
        s_strides = [0] * len(self.S)
        acc = 1
        for j in range(len(shape) - 1, -1, -1):
            jn = j + len(ctx_shape) - len(shape)
            if shape[j] != 1:
                if shape[j] != ctx_shape[jn] or shape[j] != self.S[where[jn]]:
                    raise Unfusable("operand does not broadcast")
                s_strides[where[jn]] = acc
            acc *= shape[j]
        strides = self._to_l(tuple(s_strides))
        name = ref.name if isinstance(ref, torch.fx.Node) else f"self.{ref.path}"
        spec = LeafSpec(name=name, strides=strides, dtype=dtype)
        if spec not in self.leaves:
            self.leaves.append(spec)
            self.leaf_refs.append(ref)
        return Leaf(self.leaves.index(spec))

    def scalar_leaf(self, ref: torch.fx.Node) -> Leaf:
        """A Python number given to forward, read like a broadcast 0-d tensor."""
        spec = LeafSpec(name=ref.name, strides=(0,) * len(self.L), scalar=True)
        if spec not in self.leaves:
            self.leaves.append(spec)
            self.leaf_refs.append(ref)
        return Leaf(self.leaves.index(spec))

    def channel_leaf(self, ref: Any, dtype: str) -> Expr | None:
        """A per-channel (dim 1) parameter of a norm layer whose result is `dtype`, or None."""
        if ref is None:
            return None
        shape = node_shape(ref) if isinstance(ref, torch.fx.Node) else ref.shape
        if shape != (self.S[1],):
            raise Unfusable("norm parameter shape")
        return _promoted(self.leaf(ref, shape, (1,), (self.S[1],), _storage(ref)), _storage(ref), dtype, False)

    def value(self, v: Any, ctx_shape: tuple[int, ...], where: tuple[int, ...],
              dtype: str = "float32") -> tuple[Expr, tuple[int, ...]]:
        """The expression of an operand of an op whose result is `dtype`, as PyTorch's type promotion reads
        it (`_promoted`), and its layout (the S dim of each of its dims)."""
        if isinstance(v, bool) or v is None:
            raise Unfusable("non-numeric operand")
        if isinstance(v, (int, float)):
            return Const(float(v)), ()
        if isinstance(v, torch.fx.Node) and v in self.members:
            e, lay = self.expr(v)
            return _promoted(e, _storage(v), dtype, True), lay
        if isinstance(v, torch.fx.Node) and "tensor_meta" not in v.meta and v.meta.get("type") in (float, int):
            return self.scalar_leaf(v), ()
        if isinstance(v, torch.fx.Node):
            shape = node_shape(v)
            if shape is None:
                raise Unfusable("operand is not a tensor")
            d = _storage(v)
            return _promoted(self.leaf(v, shape, where, ctx_shape, d), d, dtype, False), where[len(where) - len(shape):]
        if isinstance(v, ParamRef):
            d = _storage(v)
            return _promoted(self.leaf(v, v.shape, where, ctx_shape, d), d, dtype, False), \
                where[len(where) - len(v.shape):]
        raise Unfusable(f"operand {type(v).__name__}")

    def expr(self, n: torch.fx.Node) -> tuple[Expr, tuple[int, ...]]:
        if n in self.memo:
            return self.memo[n]
        _storage(n)
        c, shape = self.canon[n], node_shape(n)
        assert shape is not None
        if c.op == "batch_norm_eval":
            out = self._batch_norm_eval(n, c, shape)
        elif c.kind == PW:
            out = self._pointwise(n, c, shape)
        elif c.kind == ALIAS:
            out = self.value(c.inputs[0], shape, self._full(len(shape)), _storage(n))
        else:
            out = self._rowop(n, c, shape)
        self.memo[n] = out
        return out

    def _full(self, rank: int) -> tuple[int, ...]:
        r = len(self.S)
        if rank > r:
            raise Unfusable("value of higher rank than the group")
        return tuple(range(r - rank, r))

    def _pointwise(self, n: torch.fx.Node, c: Canon, shape: tuple[int, ...]) -> tuple[Expr, tuple[int, ...]]:
        inner = [a for a in c.inputs if isinstance(a, torch.fx.Node) and a in self.members]
        lays = [self.expr(a)[1] for a in inner]
        where = next((lay for lay in lays if len(lay) == len(shape)), None)
        if where is None:
            where = self._full(len(shape))
        args, dt = [], _storage(n)
        for a in c.inputs:
            e, lay = self.value(a, shape, where, dt)
            if isinstance(a, torch.fx.Node) and a in self.members and lay != where[len(where) - len(lay):]:
                raise Unfusable("operands laid out differently")
            args.append(e)
        name, params = c.op, tuple(c.params.get("p", ()))
        if name == "pow" and isinstance(args[1], Const):
            return _const_pow(args[0], args[1].value), where
        return Op(name, tuple(args), params), where

    def _batch_norm_eval(self, n: torch.fx.Node, c: Canon, shape: tuple[int, ...]) -> tuple[Expr, tuple[int, ...]]:
        """(x - running_mean) / sqrt(running_var + eps) * weight + bias, per channel (dim 1)."""
        if shape != self.S:
            raise Unfusable("batch norm inside a group of another shape")
        dt = _storage(n)
        x, _ = self.value(c.inputs[0], shape, self._full(len(shape)), dt)
        rm, rv, w, b = (self.channel_leaf(r, dt) for r in c.inputs[1:])
        if rm is None or rv is None:
            raise Unfusable("batch norm without running stats")
        y: Expr = Op("div", (Op("sub", (x, rm)), Op("sqrt", (Op("add", (rv, Const(c.params["eps"]))),))))
        if w is not None:
            y = Op("mul", (y, w))
        if b is not None:
            y = Op("add", (y, b))
        return y, self._full(len(shape))

    def _stat(self, combine: str, e: Expr) -> Stat:
        self.reductions.append(Reduction(combine, e))
        return Stat(len(self.reductions) - 1)

    def _rowop(self, n: torch.fx.Node, c: Canon, shape: tuple[int, ...]) -> tuple[Expr, tuple[int, ...]]:
        dt = _storage(n)
        x, lay = self.value(c.inputs[0], self.S, self._full(len(self.S)), dt)
        if lay != self._full(len(self.S)):
            raise Unfusable("reduction input is not full-shape")
        keep = self._full(len(self.S)) if len(shape) == len(self.S) else tuple(
            d for d in range(len(self.S)) if d not in self.D_S)
        if len(keep) != len(shape):
            raise Unfusable("reduction output rank")
        k = Const(float(self.K))
        if c.kind == REDUCE:
            s = self._stat("sum" if c.op == "mean" else c.op, x)
            return (Op("div", (s, k)) if c.op == "mean" else s), keep
        if c.op in ("softmax", "log_softmax", "logsumexp"):
            m = self._stat("max", x)
            d = Op("sub", (x, m))
            s = self._stat("sum", Op("exp", (d,)))
            if c.op == "softmax":
                return Op("div", (Op("exp", (d,)), s)), keep
            if c.op == "log_softmax":
                return Op("sub", (d, Op("log", (s,)))), keep
            return Op("add", (m, Op("log", (s,)))), keep
        mean = Op("div", (self._stat("sum", x), k))
        d = Op("sub", (x, mean))
        var = Op("div", (self._stat("sum", Op("square", (d,))), k))
        y: Expr = Op("mul", (d, Op("rsqrt", (Op("add", (var, Const(c.params["eps"]))),))))
        w, b = c.inputs[1], c.inputs[2]
        if c.op == "layer_norm":
            we = None if w is None else self.value(w, shape, keep, dt)[0]
            be = None if b is None else self.value(b, shape, keep, dt)[0]
        else:
            we, be = self.channel_leaf(w, dt), self.channel_leaf(b, dt)
        if we is not None:
            y = Op("mul", (y, we))
        if be is not None:
            y = Op("add", (y, be))
        return y, keep

    def group(self) -> Group:
        out, lay = self.expr(self.sink)
        shape = node_shape(self.sink)
        assert shape is not None
        if self.reductions:
            scope = ELEM if shape == self.S and lay == self._full(len(self.S)) else ROW
        else:
            if shape != self.S:
                raise Unfusable("pointwise sink smaller than the group")
            scope = ELEM
        g = Group(shape=self.L, reduce_dims=self.D, leaves=self.leaves, reductions=self.reductions, out=out,
                  out_scope=scope, out_shape=shape, nodes=[n.name for n in self.nodes], out_dtype=_storage(self.sink))
        if scope == ROW and (scope_of(out, g) != ROW or math.prod(shape) != g.rows):
            raise Unfusable("row output depends on elements")
        if all(leaf.scalar for leaf in self.leaves):
            raise Unfusable("no tensor input")
        return g


def _storage(v: torch.fx.Node | ParamRef) -> str:
    """The storage name of a tensor node's or parameter's dtype; Unfusable for one no group stores."""
    dt = v.dtype if isinstance(v, ParamRef) else node_dtype(v)
    name = name_of(dt)
    if name is None:
        raise Unfusable(f"{dt} tensor (fused groups store float32, bfloat16 and float16)")
    return name


def _promoted(e: Expr, have: str, want: str, stored: bool) -> Expr:
    """An operand held as `have` read by an op whose result is `want`, as PyTorch's type promotion reads it:
    unchanged when the dtypes agree or `e` is a leaf widened exactly; rounded to `have` first when `e` is an
    intermediate (`stored`: PyTorch stored it as `have`, the group holds it in fp32). Unfusable when the
    operand is wider than the result (a 0-d fp32 tensor in a bf16 op: PyTorch rounds it to bf16 on the GPU
    and not on the CPU) or the two are bf16 and fp16."""
    if have == want:
        return e
    if not widens_exactly(have, want):
        raise Unfusable(f"a {have} operand of a {want} result (PyTorch would round it to {want}): left to PyTorch")
    return Op(ROUND_OP[have], (e,)) if stored else e


def _const_pow(x: Expr, e: float) -> Expr:
    """x ** e: small integer powers as products (powf is slow and no more exact), 0.5 as sqrt."""
    if e == 2.0:
        return Op("square", (x,))
    if e == 3.0:
        return Op("mul", (Op("square", (x,)), x))
    if e == 4.0:
        return Op("square", (Op("square", (x,)),))
    if e == 1.0:
        return x
    if e == 0.5:
        return Op("sqrt", (x,))
    return Op("powc", (x,), (e,))


def build_group(nodes: list[torch.fx.Node], sink: torch.fx.Node,
                canon: dict[torch.fx.Node, Canon]) -> tuple[Group, list[Any]]:
    """The group for `nodes` (topological order, `sink` last) and its leaves' fx nodes / ParamRefs."""
    b = _Builder(nodes, sink, canon)
    g = b.group()
    return g, b.leaf_refs
