"""One-pass row statistics: two dependent reductions computed in one walk over the row.

The IR writes a norm as `sum(x)` then `sum((x - sum(x)/N)^2)` and a softmax as `max(x)` then
`sum(exp(x - max(x)))`: two walks over memory before the output walk. Such a pair is recognised here
and computed in one walk, so a norm or softmax reads its input twice instead of three times:

- mean and variance by Welford's update (Chan's merge between vectors, threads and split chunks): no
  cancellation, whatever the mean, unlike sum-of-squares; Kahan-compensated along a thread's walk, where
  a plain fp32 running mean stops moving once its increments fall under half an ulp (a thread per row of
  2^20 values around 100 was 2e-3 off);
- max and sum of exponentials by the online softmax update (the running sum is rescaled when the
  running max grows), Kahan-compensated like the other sums.

The pair's first statistic keeps the IR's meaning (the row's sum for Welford, its max for softmax), so
the rest of the group's expressions read it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kevolve.offline.graph.ir import Const, Expr, Group, Op, Reduction, Stat

WELFORD, SOFTMAX = "welford", "softmax"  # their merge functions are in cuda.PRELUDE


@dataclass(frozen=True)
class Pair:
    """Reductions `first` and `first + 1` of a group, computed together over `expr`."""

    kind: str
    """'welford' (sum, then sum of squared deviations from sum/N) or 'softmax' (max, then sum of exp(x - max))"""
    first: int
    expr: Expr
    """the value reduced (x above)"""


def _welford(a: Reduction, b: Reduction, i: int, row_len: int) -> bool:
    if a.combine != "sum" or b.combine != "sum" or not isinstance(b.expr, Op) or b.expr.name != "square":
        return False
    d = b.expr.args[0]
    mean = Op("div", (Stat(i), Const(float(row_len))))
    return isinstance(d, Op) and d.name == "sub" and d.args == (a.expr, mean)


def _softmax(a: Reduction, b: Reduction, i: int) -> bool:
    return (a.combine == "max" and b.combine == "sum" and
            b.expr == Op("exp", (Op("sub", (a.expr, Stat(i))),)))


def find_pairs(group: Group) -> dict[int, Pair]:
    """The one-pass pairs of a row group, by the index of their first reduction."""
    out: dict[int, Pair] = {}
    reds = group.reductions
    i = 0
    while i + 1 < len(reds):
        a, b = reds[i], reds[i + 1]
        kind = WELFORD if _welford(a, b, i, group.row_len) else SOFTMAX if _softmax(a, b, i) else None
        if kind is not None:
            out[i] = Pair(kind, i, a.expr)
            i += 2
        else:
            i += 1
    return out


def steps(group: Group, onepass: bool) -> list[tuple[int, ...]]:
    """The walks over each row before the output: one per reduction, or one per one-pass pair."""
    pairs = find_pairs(group) if onepass else {}
    out: list[tuple[int, ...]] = []
    i = 0
    while i < len(group.reductions):
        out.append((i, i + 1) if i in pairs else (i,))
        i += 2 if i in pairs else 1
    return out


def init_lines(pair: Pair) -> list[str]:
    """The per-thread state, declared before the walk."""
    j = pair.first
    if pair.kind == WELFORD:
        return [f"float wn{j} = 0.0f, wm{j} = 0.0f, wq{j} = 0.0f, cm{j} = 0.0f, cq{j} = 0.0f;"]
    return [f"float sm{j} = -INFINITY, ss{j} = 0.0f, sc{j} = 0.0f;"]


def update_lines(pair: Pair, vals: list[str], u: str) -> list[str]:
    """Fold one vector of values (`vals`, one per lane) into the thread's state (`u` names temporaries)."""
    j, v = pair.first, len(vals)
    if pair.kind == WELFORD:
        add = f"kv_welford_add(wn{j}, wm{j}, cm{j}, wq{j}, cq{j}, "
        if v == 1:
            return [add + f"1.0f, {vals[0]}, 0.0f);"]
        mu = f"mu{u}"
        return [f"float {mu} = ({' + '.join(vals)}) * {1.0 / v!r}f;",
                f"float q{u} = {' + '.join(f'({x} - {mu}) * ({x} - {mu})' for x in vals)};",
                add + f"{float(v)!r}f, {mu}, q{u});"]
    vmax = vals[0]
    for x in vals[1:]:
        vmax = f"fmaxf({vmax}, {x})"
    lines = [f"float mn{u} = fmaxf(sm{j}, {vmax});",
             f"if (mn{u} != sm{j}) {{ float f_ = expf(sm{j} - mn{u}); ss{j} *= f_; sc{j} *= f_; sm{j} = mn{u}; }}"]
    # a value of -inf adds 0 even while the running max is still -inf (a masked_fill(-inf) row's start: the
    # attention mask), where exp(x - max) would be exp(-inf + inf) = NaN (KernelBench L3 43/44 on the H100)
    for x in vals:
        lines.append(f"{{ float y_ = ({x} == -INFINITY ? 0.0f : expf({x} - sm{j})) - sc{j}; float t_ = ss{j} + y_; "
                     f"sc{j} = (t_ - ss{j}) - y_; ss{j} = t_; }}")
    return lines


def _names(pair: Pair) -> tuple[str, ...]:
    j = pair.first
    return (f"wn{j}", f"wm{j}", f"wq{j}") if pair.kind == WELFORD else (f"sm{j}", f"ss{j}")


def _merge(pair: Pair, other: tuple[str, ...]) -> str:
    fn = "kv_welford_merge" if pair.kind == WELFORD else "kv_softmax_merge"
    return f"{fn}({', '.join(_names(pair))}, {', '.join(other)});"


def _idents(pair: Pair) -> tuple[str, ...]:
    return ("0.0f", "0.0f", "0.0f") if pair.kind == WELFORD else ("-INFINITY", "0.0f")


def combine_lines(pair: Pair, scope: str, block: int) -> list[str]:
    """Merge the threads' states over a warp ('warp') or a block ('block'); every thread ends with the result."""
    names, j = _names(pair), pair.first
    # the walk's compensations folded in (the merges between threads are few: plain floats suffice)
    lines = [f"ss{j} -= sc{j}; sc{j} = 0.0f;" if pair.kind == SOFTMAX else
             f"wm{j} -= cm{j}; wq{j} -= cq{j}; cm{j} = cq{j} = 0.0f;"]
    if scope == "thread":
        return lines
    shfl = tuple(f"__shfl_xor_sync(0xffffffffu, {n}, o_)" for n in names)
    warp = f"for (int o_ = 16; o_ > 0; o_ >>= 1) {{ float {', '.join(f'h{k}_ = {s}' for k, s in enumerate(shfl))}; " + \
        _merge(pair, tuple(f"h{k}_" for k in range(len(names)))) + " }"
    lines.append(warp)
    if scope == "warp":
        return lines
    nw, idents = block // 32, _idents(pair)
    lines += [f"if (lane == 0) {{ {' '.join(f'kv_pr[{k}][warp] = {n};' for k, n in enumerate(names))} }}",
              "__syncthreads();",
              (f"if (warp == 0) {{ {' '.join(f'{n} = lane < {nw} ? kv_pr[{k}][lane] : {idents[k]};' for k, n in enumerate(names))} "
               f"{warp} if (lane == 0) {{ {' '.join(f'kv_pr[{k}][32] = {n};' for k, n in enumerate(names))} }} }}"),
              "__syncthreads();", " ".join(f"{n} = kv_pr[{k}][32];" for k, n in enumerate(names)), "__syncthreads();"]
    return lines


def result_lines(pair: Pair, row_len: int) -> list[str]:
    """The pair's two statistics in the IR's meaning, as `acc{first}` and `acc{first + 1}`."""
    j = pair.first
    if pair.kind == WELFORD:
        return [f"float acc{j} = wm{j} * {float(row_len)!r}f, acc{j + 1} = wq{j};"]
    return [f"float acc{j} = sm{j}, acc{j + 1} = ss{j};"]


def partial_lines(pair: Pair, slot: Callable[[int], str]) -> list[str]:
    """Thread 0 writes the block's state as a split chunk's partials (`slot(k)`: the C index of the k-th)."""
    names = _names(pair)[1:] if pair.kind == WELFORD else _names(pair)  # a chunk's count is known from its bounds
    return [f"if (threadIdx.x == 0) {{ {' '.join(f'part[{slot(pair.first + k)}] = {n};' for k, n in enumerate(names))} }}"]


def merge_partials_lines(pair: Pair, slot: Callable[[int], str], n_chunks: int, ch: int, row_len: int, block: int) -> list[str]:
    """Each thread merges some chunks' partials (`slot(k)` with the chunk index `t`), then the block merges."""
    j = pair.first
    if pair.kind == WELFORD:
        take = (f"kv_welford_merge(wn{j}, wm{j}, wq{j}, (float)min({row_len}u, (t + 1u) * {ch}u) - "
                f"(float)min({row_len}u, t * {ch}u), part[{slot(j)}], part[{slot(j + 1)}]);")
    else:
        take = f"kv_softmax_merge(sm{j}, ss{j}, part[{slot(j)}], part[{slot(j + 1)}]);"
    return [*init_lines(pair), f"for (unsigned int t = threadIdx.x; t < {n_chunks}u; t += {block}u) {{ {take} }}",
            *combine_lines(pair, "block", block)]
