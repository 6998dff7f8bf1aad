"""Every direct kind (kernels_direct/*.py), by `Group.kind`, and the direct groups of a traced module.

The kinds import direct.py's helpers; this module imports the kinds: nothing here imports itself back (it used to
be direct.py importing them by name at run time, a cycle no import statement showed).
"""

from __future__ import annotations

import torch
import torch.fx

from kevolve.offline.graph.partition import Fused
from kevolve.offline.kernels_direct import argred, conv, pool, rnn, scan
from kevolve.kernel_params import KernelParams
from kevolve.offline.kernels_direct.direct import DirectKind


def registry() -> dict[str, DirectKind]:
    """Every direct kind, by Group.kind."""
    return {"conv": conv.KIND, "pool": pool.KIND, "scan": scan.KIND, "argreduce": argred.KIND,
            "rnn": rnn.KIND}


def recurrent_groups(gm: torch.fx.GraphModule) -> list[Fused]:
    """An `rnn` group for every LSTM / GRU / RNN module call it supports: these are taken whatever else the
    graph fuses (the recurrence is the model's time, and the partitioner never sees inside the module)."""
    return [fz for n in gm.graph.nodes if (fz := rnn.KIND.find(n, gm)) is not None]


def direct_groups(gm: torch.fx.GraphModule) -> list[Fused]:
    """A direct kernel for every call node some kind recognises (graph order)."""
    kinds = registry()
    out = []
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method", "call_module"):
            continue
        for kind in kinds.values():
            fz = kind.find(n, gm)
            if fz is not None:
                out.append(fz)
                break
    return out


def direct_launcher(fz: Fused, k: int, name: str, p: KernelParams) -> str:
    """Python launcher: contiguous inputs, the output, a capped grid, the launch."""
    g = fz.group
    kind = registry()[g.kind]
    if kind.launcher is not None:
        return kind.launcher(fz, k, name, p)
    args = [f"a{i}" for i in range(len(g.leaves))]
    dt = {"float32": "torch.float32", "int64": "torch.int64"}[g.out_dtype]
    lines = [f"def _kv_launch_{k}({', '.join(args)}):", f'    """{g.describe()}"""']
    lines += [f"    {a} = {a}.contiguous()" for a in args]
    lines += [f"    out = torch.empty({tuple(g.out_shape)!r}, device=a0.device, dtype={dt})",
              f"    grid = max(1, min({kind.blocks(g, p)}, _kv_sms(a0.device) * {p.waves}))",
              f"    _kv_launch({name!r}, grid, {p.block}, ({', '.join(args)}, out))", "    return out"]
    return "\n".join(lines) + "\n"


__all__ = ["direct_groups", "direct_launcher", "recurrent_groups", "registry"]
