"""Split rows: when a group has fewer rows than the GPU has SMs (a layer norm over 16 huge rows, a
loss reduced to one number), each row is cut into `chunks` pieces handled by separate blocks.

One kernel per reduction step (a reduction, or a one-pass pair: `cuda_pair.py`) writes per-chunk
partial results; the next kernel (and the final one, which writes the output) first merges the
partials of the earlier steps, so every block sees each row statistic. Launches are stream-ordered,
so no grid-wide synchronization is needed. With one-pass pairs a layer norm or softmax is two kernels
and two walks over memory.
"""

from __future__ import annotations

from kevolve.kernel_params import KernelParams
from kevolve.offline.kernels_cuda.cuda import _signature
from kevolve.offline.kernels_cuda.cuda_launch import leaf_prologue, out_line, vector_choice
from kevolve.offline.kernels_cuda.cuda_pair import combine_lines, merge_partials_lines, partial_lines, result_lines
from kevolve.offline.kernels_cuda.cuda_row import SHARED, UNUSED, _RowWriter, block_combine
from kevolve.offline.graph.ir import ELEM, Group
from kevolve.offline.graph.ops import COMBINE

SMS = 132  # H100 / H200; only sets how many chunks a row is cut into


def chunks(group: Group, p: KernelParams) -> int:
    """Blocks per row: enough to fill the GPU `waves` times over, never more than the row needs."""
    want = max(1, (SMS * p.waves) // max(1, group.rows))
    vec = p.vec if group.row_len % p.vec == 0 else 1
    return max(1, min(want, -(-group.row_len // (p.block * vec)), 65535))


def chunk_len(group: Group, p: KernelParams) -> int:
    """Elements per chunk: a multiple of the vector width, so every chunk starts aligned."""
    vec = p.vec if group.row_len % p.vec == 0 else 1
    per = -(-group.row_len // chunks(group, p))
    return -(-per // vec) * vec


def _merge_earlier(w: _RowWriter, stage: int, n_chunks: int, ch: int) -> list[str]:
    """Lines merging the partials of the steps before `stage` into the row statistics acc{i}."""
    g, p, lines = w.g, w.p, []
    for s in w.steps[:stage]:
        i = s[0]
        def slot(k: int) -> str:
            return f"{k * g.rows * n_chunks}u + r * {n_chunks}u + t"
        if len(s) == 2:
            lines += merge_partials_lines(w.pairs[i], slot, n_chunks, ch, g.row_len, p.block)
            lines += result_lines(w.pairs[i], g.row_len)
            w.stats[i], w.stats[i + 1] = f"acc{i}", f"acc{i + 1}"
            continue
        comb = g.reductions[i].combine
        ident = COMBINE[comb][0]
        lines += [f"float acc{i} = {ident};",
                  (f"for (unsigned int t = threadIdx.x; t < {n_chunks}u; t += {p.block}u) "
                   f"acc{i} = kv_{comb}(acc{i}, part[{slot(i)}]);"),
                  *block_combine(f"kv_{comb}", f"acc{i}", ident, p.block)]
        w.stats[i] = f"acc{i}"
    return lines


def _kernel(name: str, group: Group, p: KernelParams, stage: int, vec: int | None) -> str:
    """Stage j < len(steps) writes step j's partials; the last stage writes the output."""
    w = _RowWriter(group, p, vec)
    idx, n_chunks, ch = w.idx, chunks(group, p), chunk_len(group, p)
    w.v_end = f"kend / {w.vec}u"
    lines = [f"const {idx} r = blockIdx.y, c = blockIdx.x;",
             f"const {idx} kbeg = c * {ch}u, kend = min(({idx}){group.row_len}u, kbeg + {ch}u);"]
    lines += w.head()
    lines += _merge_earlier(w, stage, n_chunks, ch)
    w.lines = []
    if stage < len(w.steps):
        s = w.steps[stage]
        slot = lambda k: f"{k * group.rows * n_chunks}u + r * {n_chunks}u + c"  # noqa: E731
        if len(s) == 2:
            pair = w.pairs[s[0]]
            w.pair_walk(pair)
            w.lines += combine_lines(pair, "block", p.block) + partial_lines(pair, slot)
        else:
            w.reduction(s[0])
            w.lines.append(f"if (threadIdx.x == 0) part[{slot(s[0])}] = acc{s[0]};")
        lines += w.lines
    elif group.out_scope == ELEM:
        w.output()
        lines += w.lines
    else:
        w.output()
        lines += [ln.replace("if (threadIdx.x == 0)", "if (threadIdx.x == 0 && c == 0)") for ln in w.lines]
    body = "\n  ".join(lines)
    return f"""{_signature(name, group, p, ", float* __restrict__ part")} {{
{SHARED}  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
{UNUSED}  {body}
}}
"""


def split_kernels(name: str, group: Group, p: KernelParams, vec: int | None = None) -> list[str]:
    """The stage kernels, named NAME_s0, NAME_s1, … (the last writes the output).

    `vec` is the access width when not `p.vec`: a scalar twin (vec=1) keeps the chunks, the partials'
    layout and so the grid that `p` gives, because the launcher sizes them from `p` whichever it runs."""
    n = len(_RowWriter(group, p).steps)
    return [_kernel(f"{name}_s{j}", group, p, j, vec) for j in range(n + 1)]


def split_launcher(group: Group, k: int, name: str, p: KernelParams) -> str:
    """Python launcher: partials buffer, then the stage kernels in order on the current stream (the
    scalar twin's where a vectorized kernel would read a pointer that is not 16-byte aligned)."""
    args = [f"a{i}" for i in range(len(group.leaves))]
    n = chunks(group, p)
    parts = max(1, len(group.reductions) * group.rows * n)
    stages = len(_RowWriter(group, p).steps) + 1
    last_grid = n if group.out_scope == ELEM else 1
    lines = [f"def _kv_launch_{k}({', '.join(args)}):", f'    """{group.describe()} (rows split in {n})"""']
    lines += leaf_prologue(group)
    lines += [out_line(group),
              f"    part = torch.empty({parts}, device=dev, dtype=torch.float32)",
              vector_choice(group, name, p, [*args, "out"]),
              "    with _kv_stream():",
              f"        ptrs = _kv_args(({', '.join(args)}, out, part))"]
    for j in range(stages):
        grid = f"({last_grid if j == stages - 1 else n}, {group.rows}, 1)"
        lines.append(f"        _kv_fn(kn + '_s{j}')({grid}, ({p.block},), ptrs)")
    lines.append("    return out")
    return "\n".join(lines) + "\n"
