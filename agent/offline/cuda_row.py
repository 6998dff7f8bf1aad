"""CUDA C for a row group: each row (the reduced dims) is walked once per reduction, then once more
to write element-wise outputs (softmax, norms) or once per row for reduced outputs (sum, logsumexp).

Rows are assigned to a block, a warp or a thread (`KernelParams.strategy`); sums are Kahan-compensated
per thread, so long rows keep fp32 accuracy close to PyTorch's own tree reductions.
"""

from __future__ import annotations

from kevolve.agent.offline.cuda import (
    _Emitter,
    _idx_type,
    _leaves_in,
    _signature,
    offset,
)
from kevolve.agent.offline.ir import (
    ELEM,
    Expr,
    Group,
    contiguous_strides,
)
from kevolve.agent.offline.ops import COMBINE
from kevolve.agent.offline.space import KernelParams


def _loop_bounds(p: KernelParams) -> tuple[str, str]:
    return {"block": ("threadIdx.x", str(p.block)), "warp": ("lane", "32"), "thread": ("0", "1"),
            "split": ("kbeg + threadIdx.x", str(p.block))}[p.strategy]


def _row_leaf(group: Group, li: int) -> bool:
    return not any(group.leaves[li].strides[d] for d in group.reduce_dims)


class _RowWriter:
    def __init__(self, group: Group, p: KernelParams) -> None:
        self.g, self.p, self.idx = group, p, _idx_type(group)
        self.lines: list[str] = []
        self.stats: dict[int, str] = {}
        self.row_vals = {li: f"rl{li}" for li in range(len(group.leaves)) if _row_leaf(group, li)}
        self.k_range = _loop_bounds(p)
        self.k_end = f"{group.row_len}u"

    def koff(self, strides: tuple[int, ...]) -> str:
        return offset(self.g.shape, strides, self.g.reduce_dims, "k", self.idx)

    def loop(self, e: Expr, tag: str, body_end: list[str]) -> list[str]:
        """A loop over the row's elements evaluating `e` (as variable returned in body) then body_end."""
        start, step = self.k_range
        leaf = dict(self.row_vals)
        loads = []
        for li in _leaves_in(e):
            if li not in leaf:
                loads.append(f"float el{li} = __ldg(in{li} + b{li} + {self.koff(self.g.leaves[li].strides)});")
                leaf[li] = f"el{li}"
        em = _Emitter(leaf, self.stats, tag)
        res = em(e)
        body = loads + em.lines + [x.replace("$v", res) for x in body_end]
        inner = "\n      ".join(body)
        unroll = f"#pragma unroll {self.p.unroll}\n    " if self.p.unroll > 1 else ""
        return [f"{unroll}for ({self.idx} k = {start}; k < {self.k_end}; k += {step}) {{\n      {inner}\n    }}"]

    def reduction(self, j: int) -> None:
        red = self.g.reductions[j]
        ident, _ = COMBINE[red.combine]
        acc, comp = f"acc{j}", f"cmp{j}"
        if red.combine == "sum":
            end = [f"float y_ = $v - {comp};", f"float t_ = {acc} + y_;", f"{comp} = (t_ - {acc}) - y_;", f"{acc} = t_;"]
            self.lines.append(f"float {acc} = 0.0f, {comp} = 0.0f;")
        else:
            end = [f"{acc} = kv_{red.combine}({acc}, $v);"]
            self.lines.append(f"float {acc} = {ident};")
        self.lines += self.loop(red.expr, f"r{j}_", end)
        f = f"kv_{red.combine}"
        if self.p.strategy == "warp":
            self.lines.append(f"KV_WARP_REDUCE({f}, {acc});")
        elif self.p.strategy in ("block", "split"):
            self.lines += block_combine(f, acc, ident, self.p.block)
        self.stats[j] = acc

    def output(self) -> None:
        g = self.g
        if g.out_scope == ELEM:
            ostr = contiguous_strides(g.shape)
            self.lines += self.loop(g.out, "o_", [f"out[ob + {self.koff(ostr)}] = $v;"])
            return
        em = _Emitter(self.row_vals, self.stats, "o_")
        res = em(g.out)
        first = {"block": "threadIdx.x == 0", "warp": "lane == 0", "thread": "true",
                 "split": "threadIdx.x == 0"}[self.p.strategy]
        self.lines += em.lines + [f"if ({first}) out[r] = {res};"]

    def kernel(self, name: str) -> str:
        g, p, idx = self.g, self.p, self.idx
        kept = g.kept_dims
        used = sorted({li for e in [g.out, *(r.expr for r in g.reductions)] for li in _leaves_in(e)})
        head = [f"const {idx} b{li} = {offset(g.shape, g.leaves[li].strides, kept, 'r', idx)};" for li in used]
        head += [f"const float rl{li} = __ldg(in{li} + b{li});" for li in used if li in self.row_vals]
        if g.out_scope == ELEM:
            head.append(f"const {idx} ob = {offset(g.shape, contiguous_strides(g.shape), kept, 'r', idx)};")
        self.lines = head
        for j in range(len(g.reductions)):
            self.reduction(j)
        self.output()
        body = "\n    ".join(self.lines)
        if p.strategy == "block":
            rows = f"for ({idx} r = blockIdx.x; r < {g.rows}u; r += gridDim.x)"
        elif p.strategy == "warp":
            wpb = p.block // 32
            rows = f"for ({idx} r = ({idx})blockIdx.x * {wpb}u + warp; r < {g.rows}u; r += ({idx})gridDim.x * {wpb}u)"
        else:
            rows = f"for ({idx} r = ({idx})blockIdx.x * {p.block}u + threadIdx.x; r < {g.rows}u; r += ({idx})gridDim.x * {p.block}u)"
        return f"""{_signature(name, g, p)} {{
  __shared__ float kv_red[33];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  (void)kv_red; (void)lane; (void)warp;
  {rows} {{
    {body}
  }}
}}
"""


def block_combine(f: str, acc: str, ident: str, block: int) -> list[str]:
    """Lines that combine `acc` over the block; every thread ends with the result in `acc`."""
    nw = block // 32
    return [f"KV_WARP_REDUCE({f}, {acc});", f"if (lane == 0) kv_red[warp] = {acc};", "__syncthreads();",
            (f"if (warp == 0) {{ {acc} = lane < {nw} ? kv_red[lane] : {ident}; "
             f"KV_WARP_REDUCE({f}, {acc}); if (lane == 0) kv_red[32] = {acc}; }}"),
            "__syncthreads();", f"{acc} = kv_red[32];", "__syncthreads();"]


def row_kernel(name: str, group: Group, p: KernelParams) -> str:
    """The row kernel's CUDA source."""
    return _RowWriter(group, p).kernel(name)


def row_grid(group: Group, p: KernelParams) -> int:
    """Blocks needed to give every row its worker (before the waves cap)."""
    if p.strategy == "block":
        return group.rows
    if p.strategy == "warp":
        return -(-group.rows // (p.block // 32))
    return -(-group.rows // p.block)
