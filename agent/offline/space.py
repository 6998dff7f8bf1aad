"""The tunable parameters of generated kernels and the search operators over them.

A candidate's parameters are written into its source as one JSON comment line
(`# kevolve-offline: {...}`), so the evolutionary loop's mutate / crossover jobs can read the
parent's settings back from the parent's source and change them.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass, fields, replace

from kevolve.agent.offline.ir import Group

BLOCKS = (64, 128, 256, 512, 1024)
VECS = (1, 2, 4)
ILPS = (1, 2, 4)
WAVES = (2, 4, 8, 16, 32)
STRATEGIES = ("block", "warp", "thread", "split")
UNROLLS = (1, 2, 4)
MARK = "# kevolve-offline: "
_MARK_RE = re.compile(r"^# kevolve-offline: (\{.*\})\s*$", re.MULTILINE)


@dataclass(frozen=True)
class KernelParams:
    """Settings of one generated kernel (each group has its own)."""

    block: int = 256
    """threads per block"""
    vec: int = 4
    """pointwise: elements per vector load/store (float4 = 4); falls back to 1 when misaligned"""
    ilp: int = 1
    """pointwise: vector slots per thread per loop iteration (independent loads in flight)"""
    waves: int = 8
    """grid size cap, in blocks per SM (grid-stride loops cover the rest)"""
    strategy: str = "block"
    """row kernels: a block, a warp or a thread per row, or several blocks per row ('split')"""
    unroll: int = 1
    """row kernels: unroll factor of the per-row loops"""


def default_params(group: Group) -> KernelParams:
    """A sensible starting point: a block per long contiguous row, a thread per strided row."""
    if group.kind == "gemm":
        return KernelParams(block=256, vec=1, unroll=2)
    if group.kind != "fused":  # direct kernels: a thread per output (per `ilp` output channels for conv)
        return KernelParams(block=256, vec=1, ilp=4 if group.kind == "conv" else 1, waves=8, unroll=1)
    if group.is_pointwise:
        vec = 4 if group.numel % 4 == 0 else 1
        return KernelParams(block=256, vec=vec, ilp=2 if group.numel >= 1 << 22 else 1, waves=8)
    inner = len(group.shape) - 1 in group.reduce_dims or group.row_len == 1
    if not inner and group.rows >= 4096:
        return KernelParams(block=128, strategy="thread", waves=8)
    if group.row_len <= 256 and group.rows >= 1024:
        return KernelParams(block=256, strategy="warp", waves=8)
    block = 1024 if group.row_len >= 8192 else 512 if group.row_len >= 2048 else 256
    return KernelParams(block=block, strategy="block", waves=8)


def legal(p: KernelParams, group: Group) -> KernelParams:
    """`p` adjusted to what the group allows (vector width must divide the size, …)."""
    if group.kind == "gemm":  # 256 threads, 4x4 outputs each; the k-step (unroll) is the one knob
        return replace(p, block=256, vec=1, ilp=1, strategy="block", unroll=2 if p.unroll >= 2 else 1)
    if group.kind != "fused":
        return replace(p, vec=1, ilp=p.ilp if group.kind == "conv" else 1, strategy="block", block=max(p.block, 64))
    if group.is_pointwise:
        vec = p.vec if group.numel % p.vec == 0 else 1
        return replace(p, vec=vec, strategy="block", unroll=1)
    if p.strategy in ("warp", "split") and p.block < 64:
        p = replace(p, block=64)
    return replace(p, vec=1, ilp=1)


def mutate(p: KernelParams, group: Group, rng: random.Random) -> KernelParams:
    """Change one or two settings to a neighbouring value."""
    choices = {"block": BLOCKS, "waves": WAVES}
    if group.kind == "gemm":
        choices = {"unroll": UNROLLS}
    elif group.kind != "fused":
        choices |= {"unroll": UNROLLS} | ({"ilp": ILPS} if group.kind == "conv" else {})
    elif group.is_pointwise:
        choices |= {"vec": VECS, "ilp": ILPS}
    else:
        choices |= {"strategy": STRATEGIES, "unroll": UNROLLS}
    out = p
    for name in rng.sample(sorted(choices), k=min(len(choices), rng.choice((1, 1, 2)))):
        values = choices[name]
        cur = getattr(out, name)
        if name == "strategy" or cur not in values:
            new = rng.choice([v for v in values if v != cur] or list(values))
        else:
            i = values.index(cur) + rng.choice((-1, 1))
            new = values[max(0, min(len(values) - 1, i))]
        out = replace(out, **{name: new})
    return legal(out, group)


def crossover(a: KernelParams, b: KernelParams, group: Group, rng: random.Random) -> KernelParams:
    """Each setting from one parent or the other."""
    vals = {f.name: getattr(a if rng.random() < 0.5 else b, f.name) for f in fields(KernelParams)}
    return legal(KernelParams(**vals), group)


def encode(params: list[KernelParams], problem_id: str = "") -> str:
    """The marker line carried in a generated source."""
    return MARK + json.dumps({"problem": problem_id, "groups": [asdict(p) for p in params]}, separators=(",", ":"))


def decode(source: str, problem_id: str | None = None) -> list[KernelParams] | None:
    """The parameters a generated source was made with (for `problem_id`, when given), or None if it is
    not an offline candidate (of that problem)."""
    m = _MARK_RE.search(source)
    if m is None:
        return None
    try:
        data = json.loads(m.group(1))
        if problem_id is not None and data.get("problem") != problem_id:
            return None
        return [KernelParams(**g) for g in data["groups"]]
    except (ValueError, TypeError, KeyError):
        return None
