"""Split rows: when a group has fewer rows than the GPU has SMs (a layer norm over 16 huge rows, a
loss reduced to one number), each row is cut into `chunks` pieces handled by separate blocks.

One kernel per reduction writes per-chunk partial results; the next kernel (and the final one, which
writes the output) first combines the partials of the earlier reductions, so every block sees each
row statistic. Launches are stream-ordered, so no grid-wide synchronization is needed.
"""

from __future__ import annotations

from kevolve.agent.offline.cuda import _leaves_in, offset
from kevolve.agent.offline.cuda_row import _RowWriter, block_combine
from kevolve.agent.offline.ir import ELEM, Group, contiguous_strides
from kevolve.agent.offline.ops import COMBINE
from kevolve.agent.offline.space import KernelParams

SMS = 132  # H100 / H200; only sets how many chunks a row is cut into


def chunks(group: Group, p: KernelParams) -> int:
    """Blocks per row: enough to fill the GPU `waves` times over, never more than the row needs."""
    want = max(1, (SMS * p.waves) // max(1, group.rows))
    return max(1, min(want, -(-group.row_len // p.block), 65535))


def _signature(name: str, group: Group, p: KernelParams) -> str:
    args = ", ".join(f"const float* __restrict__ in{i}" for i in range(len(group.leaves)))
    return (f'extern "C" __global__ void __launch_bounds__({p.block}) {name}({args}, float* __restrict__ out, '
            f"float* __restrict__ part)")


def _kernel(name: str, group: Group, p: KernelParams, stage: int) -> str:
    """Stage j < len(reductions) writes reduction j's partials; the last stage writes the output."""
    w = _RowWriter(group, p)
    idx, n_chunks = w.idx, chunks(group, p)
    ch = -(-group.row_len // n_chunks)
    w.k_end = "kend"
    kept = group.kept_dims
    used = sorted({li for e in [group.out, *(r.expr for r in group.reductions)] for li in _leaves_in(e)})
    lines = [f"const {idx} r = blockIdx.y, c = blockIdx.x;",
             f"const {idx} kbeg = c * {ch}u, kend = min(({idx}){group.row_len}u, kbeg + {ch}u);"]
    lines += [f"const {idx} b{li} = {offset(group.shape, group.leaves[li].strides, kept, 'r', idx)};" for li in used]
    lines += [f"const float rl{li} = __ldg(in{li} + b{li});" for li in used if li in w.row_vals]
    for i in range(min(stage, len(group.reductions))):
        comb = group.reductions[i].combine
        ident = COMBINE[comb][0]
        lines += [f"float acc{i} = {ident};",
                  (f"for (int t = threadIdx.x; t < {n_chunks}; t += {p.block}) "
                   f"acc{i} = kv_{comb}(acc{i}, part[{i * group.rows * n_chunks}u + r * {n_chunks}u + t]);"),
                  *block_combine(f"kv_{comb}", f"acc{i}", ident, p.block)]
        w.stats[i] = f"acc{i}"
    w.lines = []
    if stage < len(group.reductions):
        w.reduction(stage)
        lines += w.lines
        lines.append(f"if (threadIdx.x == 0) part[{stage * group.rows * n_chunks}u + r * {n_chunks}u + c] = acc{stage};")
    elif group.out_scope == ELEM:
        lines.append(f"const {idx} ob = {offset(group.shape, contiguous_strides(group.shape), kept, 'r', idx)};")
        w.output()
        lines += w.lines
    else:
        w.output()
        lines += [ln.replace("if (threadIdx.x == 0)", "if (threadIdx.x == 0 && c == 0)") for ln in w.lines]
    body = "\n  ".join(lines)
    return f"""{_signature(name, group, p)} {{
  __shared__ float kv_red[33];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  (void)kv_red; (void)lane; (void)warp;
  {body}
}}
"""


def split_kernels(name: str, group: Group, p: KernelParams) -> list[str]:
    """The stage kernels, named NAME_s0, NAME_s1, … (the last writes the output)."""
    return [_kernel(f"{name}_s{j}", group, p, j) for j in range(len(group.reductions) + 1)]


def split_launcher(group: Group, k: int, name: str, p: KernelParams) -> str:
    """Python launcher: partials buffer, then the stage kernels in order on the current stream."""
    from kevolve.agent.offline.emit import leaf_prologue

    args = [f"a{i}" for i in range(len(group.leaves))]
    n = chunks(group, p)
    parts = max(1, len(group.reductions) * group.rows * n)
    stages = len(group.reductions) + 1
    last_grid = n if group.out_scope == ELEM else 1
    lines = [f"def _kv_launch_{k}({', '.join(args)}):", f'    """{group.describe()} (rows split in {n})"""']
    lines += leaf_prologue(group)
    lines += [f"    out = torch.empty({tuple(group.out_shape)!r}, device=dev, dtype=torch.float32)",
              f"    part = torch.empty({parts}, device=dev, dtype=torch.float32)",
              "    with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):",
              f"        ptrs = tuple(cp.asarray(t.detach()) for t in ({', '.join(args)}, out, part))"]
    for j in range(stages):
        grid = f"({last_grid if j == stages - 1 else n}, {group.rows}, 1)"
        lines.append(f"        _kv_fn({name + f'_s{j}'!r})({grid}, ({p.block},), ptrs)")
    lines.append("    return out")
    return "\n".join(lines) + "\n"
