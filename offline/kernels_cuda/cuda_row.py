"""CUDA C for a row group: each row (the reduced dims) is walked once per reduction step, then once
more to write element-wise outputs (softmax, norms) or once per row for reduced outputs (sum, logsumexp).

Rows are assigned to a block, a warp or a thread (`KernelParams.strategy`); sums are Kahan-compensated
per thread, so long rows keep fp32 accuracy close to PyTorch's own tree reductions. A walk reads
`vec` elements per load (float2 / float4 where the row is contiguous in a leaf; the launcher falls back
to a scalar twin when a pointer is not 16-byte aligned) and keeps `unroll` loads in flight per thread.
Dependent reduction pairs (mean then variance, max then sum of exponentials) share one walk
(`cuda_pair.py`) unless `onepass` is off.
"""

from __future__ import annotations

from collections.abc import Callable

from kevolve.kernel_params import KernelParams
from kevolve.offline.kernels_cuda.cuda import (
    _Emitter,
    _idx_type,
    _leaves_in,
    _runs,
    _signature,
    offset,
)
from kevolve.offline.kernels_cuda.cuda_pair import (
    Pair,
    combine_lines,
    find_pairs,
    init_lines,
    result_lines,
    steps,
    update_lines,
)
from kevolve.offline.graph.ir import (
    ELEM,
    Expr,
    Group,
    contiguous_strides,
)
from kevolve.offline.graph.ops import COMBINE
from kevolve.offline.kernels_cuda.cuda_dtype import lanes, narrow, pack, vec_type, widen, zero

SHARED = "  __shared__ float kv_red[33];\n  __shared__ float kv_pr[3][33];\n"
UNUSED = "  (void)kv_red; (void)kv_pr; (void)lane; (void)warp;\n"


def _row_leaf(group: Group, li: int) -> bool:
    return not any(group.leaves[li].strides[d] for d in group.reduce_dims)


def row_contiguous(group: Group, strides: tuple[int, ...]) -> bool:
    """Whether these strides walk each row as one contiguous run (element k of the row at offset k)."""
    return _runs(group.shape, strides, group.reduce_dims) == [(group.row_len, 1)]


def vector_leaf(group: Group, li: int, vec: int) -> bool:
    """Whether leaf `li` can be read `vec` elements per load: contiguous rows starting at multiples of `vec`
    (given a 16-byte aligned base pointer, which the launcher checks)."""
    spec = group.leaves[li]
    return (vec > 1 and group.row_len % vec == 0 and row_contiguous(group, spec.strides)
            and all(spec.strides[d] % vec == 0 for d in group.kept_dims))


def vector_out(group: Group, vec: int) -> bool:
    """Whether an element-wise output can be written `vec` elements per store."""
    return vec > 1 and group.row_len % vec == 0 and row_contiguous(group, contiguous_strides(group.shape))


def row_vectorizes(group: Group, vec: int) -> bool:
    """Whether any load or store of the row walks uses `vec`-wide accesses (else a wider `vec` only unrolls)."""
    return vector_out(group, vec) or any(vector_leaf(group, li, vec) for li in range(len(group.leaves)))


class _RowWriter:
    def __init__(self, group: Group, p: KernelParams, vec: int | None = None) -> None:
        """`vec`: the access width, when not `p.vec` (a scalar twin: 1, keeping every other choice of `p`)."""
        self.g, self.p, self.idx = group, p, _idx_type(group)
        vec = p.vec if vec is None else vec
        self.vec = vec if group.row_len % vec == 0 else 1
        self.lines: list[str] = []
        self.stats: dict[int, str] = {}
        self.pairs: dict[int, Pair] = find_pairs(group) if p.onepass else {}
        self.steps = steps(group, p.onepass)
        self.row_vals = {li: f"rl{li}" for li in range(len(group.leaves)) if _row_leaf(group, li)}
        v = self.vec
        self.v_start = {"block": "threadIdx.x", "warp": "lane", "thread": "0",
                        "split": f"kbeg / {v}u + threadIdx.x"}[p.strategy]
        self.v_step = {"block": p.block, "warp": 32, "thread": 1, "split": p.block}[p.strategy]
        self.v_end = f"{group.row_len // v}u"
        self.scope = {"block": "block", "split": "block", "warp": "warp", "thread": "thread"}[p.strategy]

    def koff(self, strides: tuple[int, ...], var: str = "k") -> str:
        return offset(self.g.shape, strides, self.g.reduce_dims, var, self.idx)

    def _loads(self, used: list[int], u: int, lane_leaf: list[dict[int, str]]) -> list[str]:
        """Loads of slot `u` (vector index kv{u}), each lane's leaf names filled into `lane_leaf`."""
        v, idx, end, kv = self.vec, self.idx, self.v_end, f"kv{u}"
        out = [f"const {idx} {kv} = kb + {u * self.v_step}u;"]
        out += [f"const {idx} k{u}_{lane} = {kv} * {v}u + {lane}u;" for lane in range(v)]
        for li in used:
            dt = self.g.leaves[li].dtype
            if vector_leaf(self.g, li, v):
                vt = vec_type(dt, v)
                out += [f"{vt} v{li}_{u} = {zero(dt, v)};",
                        f"if ({kv} < {end}) v{li}_{u} = __ldg(reinterpret_cast<const {vt}*>(in{li} + b{li}) + {kv});"]
                for lane, x in enumerate(lanes(dt, v, f"v{li}_{u}")):
                    lane_leaf[lane][li] = x
                continue
            for lane in range(v):
                koff = self.koff(self.g.leaves[li].strides, f"k{u}_{lane}")
                ld = widen(dt, f"__ldg(in{li} + b{li} + {koff})")
                out.append(f"float e{li}_{u}_{lane} = {kv} < {end} ? {ld} : 0.0f;")
                lane_leaf[lane][li] = f"e{li}_{u}_{lane}"
        return out

    def loop(self, e: Expr, tag: str, per_vec: Callable[[list[str], int], list[str]]) -> list[str]:
        """A walk over the row evaluating `e` per element; `per_vec(values, u)` consumes each vector slot.

        `unroll` slots per iteration: all their loads first (in flight together), then their arithmetic."""
        used = [li for li in _leaves_in(e) if li not in self.row_vals]
        loads: list[str] = []
        work: list[str] = []
        for u in range(self.p.unroll):
            lane_leaf = [dict(self.row_vals) for _ in range(self.vec)]
            loads += self._loads(used, u, lane_leaf)
            body, vals = [], []
            for lane in range(self.vec):
                em = _Emitter(lane_leaf[lane], self.stats, f"{tag}{u}_{lane}_")
                vals.append(em(e))
                body += em.lines
            inner = "\n        ".join(body + per_vec(vals, u))
            work.append(f"if (kv{u} < {self.v_end}) {{\n        {inner}\n      }}")
        step = self.v_step * self.p.unroll
        inner = "\n      ".join(loads + work)
        return [f"for ({self.idx} kb = {self.v_start}; kb < {self.v_end}; kb += {step}u) {{\n      {inner}\n    }}"]

    def reduction(self, j: int) -> None:
        """Walk for reduction j alone; every thread ends with the row's value in acc{j}."""
        red = self.g.reductions[j]
        ident, _ = COMBINE[red.combine]
        acc, comp = f"acc{j}", f"cmp{j}"
        if red.combine == "sum":
            def per_vec(vals: list[str], u: int) -> list[str]:
                return [f"{{ float y_ = {x} - {comp}; float t_ = {acc} + y_; {comp} = (t_ - {acc}) - y_; {acc} = t_; }}"
                        for x in vals]
            self.lines.append(f"float {acc} = 0.0f, {comp} = 0.0f;")
        else:
            def per_vec(vals: list[str], u: int) -> list[str]:
                return [f"{acc} = kv_{red.combine}({acc}, {x});" for x in vals]
            self.lines.append(f"float {acc} = {ident};")
        self.lines += self.loop(red.expr, f"r{j}_", per_vec)
        f = f"kv_{red.combine}"
        if self.scope == "warp":
            self.lines.append(f"KV_WARP_REDUCE({f}, {acc});")
        elif self.scope == "block":
            self.lines += block_combine(f, acc, ident, self.p.block)
        self.stats[j] = acc

    def pair_walk(self, pair: Pair) -> None:
        """One walk for both reductions of a pair, merged over the row's threads (not yet its statistics)."""
        self.lines += init_lines(pair)
        self.lines += self.loop(pair.expr, f"r{pair.first}_",
                                lambda vals, u: update_lines(pair, vals, f"_{pair.first}_{u}"))

    def pair(self, pair: Pair) -> None:
        """Walk, merge and name the pair's two statistics (acc{first}, acc{first + 1})."""
        self.pair_walk(pair)
        self.lines += combine_lines(pair, self.scope, self.p.block)
        self.lines += result_lines(pair, self.g.row_len)
        self.stats[pair.first], self.stats[pair.first + 1] = f"acc{pair.first}", f"acc{pair.first + 1}"

    def step(self, s: tuple[int, ...]) -> None:
        """One walk: a single reduction or a one-pass pair."""
        if len(s) == 2:
            self.pair(self.pairs[s[0]])
        else:
            self.reduction(s[0])

    def output(self) -> None:
        g = self.g
        if g.out_scope == ELEM:
            ostr = contiguous_strides(g.shape)
            od = g.out_dtype
            if vector_out(g, self.vec):
                vt = vec_type(od, self.vec)

                def store(vals: list[str], u: int) -> list[str]:
                    return [f"reinterpret_cast<{vt}*>(out + ob)[kv{u}] = {pack(od, self.vec, vals)};"]
            else:
                def store(vals: list[str], u: int) -> list[str]:
                    return [f"out[ob + {self.koff(ostr, f'k{u}_{lane}')}] = {narrow(od, x)};"
                            for lane, x in enumerate(vals)]
            self.lines += self.loop(g.out, "o_", store)
            return
        em = _Emitter(self.row_vals, self.stats, "o_")
        res = em(g.out)
        first = {"block": "threadIdx.x == 0", "warp": "lane == 0", "thread": "true",
                 "split": "threadIdx.x == 0"}[self.p.strategy]
        self.lines += em.lines + [f"if ({first}) out[r] = {narrow(g.out_dtype, res)};"]

    def head(self) -> list[str]:
        """Per-row base offsets of the leaves (and the output), and the leaves constant along the row."""
        g, idx = self.g, self.idx
        kept = g.kept_dims
        used = sorted({li for e in [g.out, *(r.expr for r in g.reductions)] for li in _leaves_in(e)})
        head = [f"const {idx} b{li} = {offset(g.shape, g.leaves[li].strides, kept, 'r', idx)};" for li in used]
        head += [f"const float rl{li} = {widen(g.leaves[li].dtype, f'__ldg(in{li} + b{li})')};"
                 for li in used if li in self.row_vals]
        if g.out_scope == ELEM:
            head.append(f"const {idx} ob = {offset(g.shape, contiguous_strides(g.shape), kept, 'r', idx)};")
        return head

    def kernel(self, name: str) -> str:
        g, p, idx = self.g, self.p, self.idx
        self.lines = self.head()
        for s in self.steps:
            self.step(s)
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
{SHARED}  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
{UNUSED}  {rows} {{
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


def row_kernel(name: str, group: Group, p: KernelParams, vec: int | None = None) -> str:
    """The row kernel's CUDA source (`vec`: its access width when not `p.vec`, for a scalar twin)."""
    return _RowWriter(group, p, vec).kernel(name)


def row_grid(group: Group, p: KernelParams) -> int:
    """Blocks needed to give every row its worker (before the waves cap)."""
    if p.strategy == "block":
        return group.rows
    if p.strategy == "warp":
        return -(-group.rows // (p.block // 32))
    return -(-group.rows // p.block)
