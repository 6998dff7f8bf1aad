"""The space of generated kernels' parameters (`KernelParams`, kevolve/kernel_params.py): defaults, legal
values, and the search operators over them.

What a candidate was made with travels beside its source as a typed record (`Candidate.offline`, an
`OfflineChoice`), so the loop's mutate / crossover / repair jobs read their parents' settings from it.
"""

from __future__ import annotations

import random
from dataclasses import fields, replace

from kevolve.kernel_params import KernelParams
from kevolve.offline.graph.ir import Group, Leaf

BLOCKS = (64, 128, 256, 512, 1024)
VECS = (1, 2, 4)
ILPS = (1, 2, 4)
POOL_RUNS = (1, 2, 4, 8)  # pooling: outputs of the last dim per thread (`ilp`), their windows' shared inputs loaded once
WAVES = (2, 4, 8, 16, 32)
STRATEGIES = ("block", "warp", "thread", "split")
UNROLLS = (1, 2, 4)
TILES = (32, 64, 128, 256)
TILE_KS = (16, 32, 64)
WARPS = (4, 8)
STAGES = (2, 3, 4, 5)
PRECISIONS = ("tf32x3", "ieee")
SPLITS = (1, 2, 4, 8, 16, 32, 64)  # Triton product: slices of K (a bare product only)
CONV_PRECISIONS = ("tf32", "tf32x3", "ieee")
"""Triton convolutions ('tconv'): TF32 first, as cuDNN runs PyTorch's float32 convolutions by default"""
TRITON_KINDS = ("mm", "tconv")
SMEM_BYTES = 200 * 1024  # an H100 block may use up to 227 KB of shared memory; leave room for the epilogue
_MM_FIELDS = ("tile_m", "tile_n", "tile_k", "warps", "stages", "precision", "layout", "split_k")
LAYOUTS = ("nchw", "nhwc", "library")


def default_params(group: Group) -> KernelParams:
    """A sensible starting point: a block per long contiguous row, a thread per strided row."""
    if group.kind == "gemm":
        return KernelParams(block=256, vec=1, unroll=2)
    if group.kind == "mm":
        p = legal(KernelParams(block=256, vec=1), group)
        return legal(replace(p, split_k=auto_split(group, p)), group)
    if group.kind == "tconv":  # with an epilogue, or feeding another kernel: the library's convolution first
        spec = group.spec  # (KernelParams.layout; a lone convolution, KernelBench level 1, starts as the Triton one)
        layout = "library" if spec.conv_leaf >= 0 or spec.library_first else "nchw"  # type: ignore[attr-defined]
        return legal(KernelParams(block=256, vec=1, tile_m=128, tile_n=64, tile_k=32, warps=4, stages=3,
                                  precision="tf32", layout=layout), group)
    if group.kind == "pool":  # a thread per `ilp` outputs of the last dim: the fewest that load at most 3
        return KernelParams(block=256, vec=1, ilp=_pool_run(group.spec), waves=8, unroll=1)  # inputs per output
    if group.kind != "fused":  # direct kernels: a thread per output (per `ilp` output channels for conv)
        return KernelParams(block=256, vec=1, ilp=4 if group.kind == "conv" else 1, waves=8, unroll=1)
    if group.is_pointwise:
        vec = 4 if group.numel % 4 == 0 else 1
        return KernelParams(block=256, vec=vec, ilp=2 if group.numel >= 1 << 22 else 1, waves=8)
    inner = len(group.shape) - 1 in group.reduce_dims or group.row_len == 1
    if not inner and group.rows >= 4096:
        return KernelParams(block=128, vec=1, strategy="thread", waves=8)
    # Row kernels walk rows in vectors, one pass (Kahan-compensated Welford). Both were off for a day:
    # they gave wrong LayerNorm statistics on the H100 (a split scalar twin cut into other chunks than
    # its launcher's grid; an uncompensated Welford mean stalling on long per-thread walks). Fixed and
    # found on the CPU emulator (tests/unit/test_offline_rows_emulated.py), then tests/gpu/
    # test_offline_gpu.py with these settings on: 54 passed on the H100 (2026-11-24, fifth session).
    vec = ROW_VECS[-1] if group.row_len % ROW_VECS[-1] == 0 else 1
    if group.row_len <= 256 and group.rows >= 1024:
        return KernelParams(block=256, vec=vec, strategy="warp", waves=8, onepass=ROW_ONEPASS[0])
    block = 1024 if group.row_len >= 8192 else 512 if group.row_len >= 2048 else 256
    unroll = 2 if ROW_VECS[-1] > 1 and group.row_len >= 4 * block * vec else 1  # phase-1 default: 1
    return KernelParams(block=block, vec=vec, strategy="block", waves=8, unroll=unroll, onepass=ROW_ONEPASS[0])


ROW_VECS = (1, 2, 4)  # the last is the default where the row length allows it: see the row defaults above
ROW_ONEPASS = (True, False)  # the first is the default


def _pool_run(spec: object) -> int:
    """Outputs of the last dim per pooling thread: the fewest (of POOL_RUNS) whose windows load at most 3 inputs
    per output (a stride-1 window of 8: 4 outputs, 2.75 loads each; dilated by 3, as KernelBench L1 41: 8
    outputs, 3.6 each), else the most."""
    k, st, dil = spec.kernel[-1], spec.stride[-1], spec.dilation[-1]  # type: ignore[attr-defined]
    for r in POOL_RUNS:
        if len({o * st + j * dil for o in range(r) for j in range(k)}) <= 3 * r:
            return r
    return POOL_RUNS[-1]


def legal(p: KernelParams, group: Group) -> KernelParams:
    """`p` adjusted to what the group allows (vector width must divide the size, …)."""
    if group.kind == "gemm":  # 256 threads, 4x4 outputs each; the k-step (unroll) is the one knob
        return replace(p, block=256, vec=1, ilp=1, strategy="block", unroll=2 if p.unroll >= 2 else 1)
    if group.kind == "mm":
        return _legal_mm(p, group)
    if group.kind == "tconv":
        return _legal_tconv(p, group)
    if group.kind == "pool":  # `ilp`: outputs along the last dim per thread (unroll means nothing there)
        return replace(p, vec=1, ilp=p.ilp if p.ilp in POOL_RUNS else 1, strategy="block", block=max(p.block, 64),
                       unroll=1)
    if group.kind != "fused":  # conv: `ilp` output channels per thread
        return replace(p, vec=1, ilp=p.ilp if group.kind == "conv" else 1, strategy="block", block=max(p.block, 64))
    if group.is_pointwise:
        vec = p.vec if group.numel % p.vec == 0 else 1
        return replace(p, vec=vec, strategy="block", unroll=1)
    if p.strategy in ("warp", "split") and p.block < 64:
        p = replace(p, block=64)
    return replace(p, vec=p.vec if p.vec in ROW_VECS and group.row_len % p.vec == 0 else 1, ilp=1,
                   unroll=p.unroll if p.unroll in UNROLLS else 1,
                   onepass=p.onepass if p.onepass in ROW_ONEPASS else ROW_ONEPASS[0])


def _legal_mm(p: KernelParams, group: Group) -> KernelParams:
    """Tiles no larger than the product needs, at most 128 accumulators per thread, pipeline within smem;
    K slices only for a product with no epilogue (the slices' sums meet in the output), each at least
    MIN_SLICE_STEPS steps of tile_k deep."""
    s = group.gemm
    q = _legal_tiles(p, s.m, s.n, 32, 8, PRECISIONS)
    split = p.split_k if p.split_k in SPLITS and bare_product(group) else 1
    while split > 1 and -(-s.k // q.tile_k) < split * MIN_SLICE_STEPS:
        split //= 2
    return replace(q, layout="nchw", split_k=split)


MIN_SLICE_STEPS = 8
_SPLIT_SMS = 132  # H100 / H200: how many programs make the machine busy (two per SM)


def bare_product(group: Group) -> bool:
    """An `mm` group that writes the product as it is: its output is the product's own leaf. One leaf is not
    enough: an epilogue over the product alone (KernelBench L2 59's x * sigmoid(x) * 2.0, its constant folded)
    has one leaf too, and K slices summed into the output would skip it (max error 0.43 on the H100)."""
    if group.kind != "mm" or len(group.leaves) != 1:
        return False
    return group.out == Leaf(group.spec.mm_leaf)  # type: ignore[attr-defined]


def auto_split(group: Group, p: KernelParams) -> int:
    """The K slices that give a bare product with few output tiles two programs per SM (1 otherwise)."""
    s = group.gemm
    if not bare_product(group):
        return 1
    programs = -(-s.m // p.tile_m) * -(-s.n // p.tile_n) * s.batch
    split = 1
    while programs * split < 2 * _SPLIT_SMS and split < SPLITS[-1]:
        split *= 2
    return split


def _legal_tconv(p: KernelParams, group: Group) -> KernelParams:
    """As `_legal_mm` over the convolution's implicit product: rows (batch x output positions), a group's
    output channels (tiles down to 16, tl.dot's least), depth (its input channels x the window)."""
    s = group.spec
    q = _legal_tiles(p, s.m, s.ocg, 16, 4, CONV_PRECISIONS)  # type: ignore[attr-defined]
    layout = p.layout if p.layout in LAYOUTS else LAYOUTS[0]
    if layout == "library" and len(s.conv.kernel) == 1:  # type: ignore[attr-defined]
        layout = LAYOUTS[0]  # no channels-last memory format for 1-d (3-dim) tensors
    if layout == "library":  # no product in the kernel: depth, stages and precision mean nothing (one candidate)
        q = replace(q, tile_k=32, stages=1, precision=CONV_PRECISIONS[0])
    return replace(q, layout=layout, split_k=1)


def _legal_tiles(p: KernelParams, m: int, n: int, n_low: int, warps_default: int,
                 precisions: tuple[str, ...]) -> KernelParams:
    """Tiles within the product (rows at least 32, columns at least `n_low`), at most 128 accumulators per
    thread, a pipeline within shared memory, a precision of `precisions` (the first when `p`'s is not)."""
    def cap(t: int, size: int, low: int) -> int:
        return max(low, min(t, 1 << max(low.bit_length() - 1, (size - 1).bit_length())))

    tm, tn = cap(p.tile_m, m, 32), cap(p.tile_n, n, n_low)
    tk = p.tile_k if p.tile_k in TILE_KS else 32
    warps = p.warps if p.warps in WARPS else warps_default
    while tm * tn // (32 * warps) > 128:
        if warps < 8:
            warps = 8
        elif tn >= tm:
            tn //= 2
        else:
            tm //= 2
    stages = max(2, min(p.stages, SMEM_BYTES // (4 * tk * (tm + tn))))
    prec = p.precision if p.precision in precisions else precisions[0]
    return replace(p, tile_m=tm, tile_n=tn, tile_k=tk, warps=warps, stages=stages, precision=prec,
                   block=256, vec=1, ilp=1, strategy="block", unroll=1)


def more_precise(p: KernelParams, group: Group) -> KernelParams:
    """The next more exact product precision of a Triton group (tf32 -> tf32x3 -> ieee); `p` otherwise. A
    library convolution runs in whatever the library chose (TF32 on cuDNN channels-last where eager's NCHW
    call may have run fp32): its next step is the Triton convolution in tf32x3."""
    if group.kind not in TRITON_KINDS:
        return p
    if p.layout == "library":
        return legal(replace(p, layout=LAYOUTS[0], precision="tf32x3"), group)
    order = CONV_PRECISIONS if group.kind == "tconv" else PRECISIONS
    i = order.index(p.precision) if p.precision in order else len(order) - 1
    return replace(p, precision=order[min(i + 1, len(order) - 1)])


def mutate(p: KernelParams, group: Group, rng: random.Random) -> KernelParams:
    """Change one or two settings to a neighbouring value."""
    choices: dict[str, tuple] = {"block": BLOCKS, "waves": WAVES}
    if group.kind == "gemm":
        choices = {"unroll": UNROLLS}
    elif group.kind in TRITON_KINDS:
        choices = {"tile_m": TILES, "tile_n": TILES, "tile_k": TILE_KS, "warps": WARPS, "stages": STAGES,
                   "precision": CONV_PRECISIONS if group.kind == "tconv" else PRECISIONS}
        if group.kind == "tconv":
            choices["layout"] = LAYOUTS
        elif bare_product(group):
            choices["split_k"] = SPLITS
    elif group.kind != "fused":
        choices |= {"ilp": POOL_RUNS} if group.kind == "pool" else (
            {"unroll": UNROLLS} | ({"ilp": ILPS} if group.kind == "conv" else {}))
    elif group.is_pointwise:
        choices |= {"vec": VECS, "ilp": ILPS}
    else:
        choices |= {"strategy": STRATEGIES, "unroll": UNROLLS, "vec": ROW_VECS, "onepass": ROW_ONEPASS}
    out = p
    for name in rng.sample(sorted(choices), k=min(len(choices), rng.choice((1, 1, 2)))):
        values = choices[name]
        cur = getattr(out, name)
        if name in ("strategy", "precision", "onepass", "layout") or cur not in values:
            new = rng.choice([v for v in values if v != cur] or list(values))
        else:
            i = values.index(cur) + rng.choice((-1, 1))
            new = values[max(0, min(len(values) - 1, i))]
        out = replace(out, **{name: new})
    return legal(out, group)


def crossover(a: KernelParams, b: KernelParams, group: Group, rng: random.Random) -> KernelParams:
    """Each setting from one parent or the other."""
    names = [f.name for f in fields(KernelParams) if (f.name in _MM_FIELDS) == (group.kind in TRITON_KINDS)]
    vals = {n: getattr(a if rng.random() < 0.5 else b, n) for n in names}
    return legal(replace(a, **vals), group)


def describe(p: KernelParams, group: Group) -> str:
    """The settings that matter for this group's kind, in a few words (for reports: 'rows split vec4 u2 1-pass')."""
    if group.kind in TRITON_KINDS:
        if p.layout == "library":
            return f"{group.kind} library conv channels-last, epilogue {p.tile_m}x{p.tile_n}"
        return (f"{group.kind} {p.tile_m}x{p.tile_n}x{p.tile_k} {p.precision}" + (" nhwc" if p.layout == "nhwc" else "")
                + (f" split{p.split_k}" if p.split_k > 1 else ""))
    if group.kind != "fused":
        return f"{group.kind} b{p.block}" + (f" x{p.ilp}" if p.ilp > 1 and group.kind in ("conv", "pool") else "")
    if group.is_pointwise:
        return f"pw vec{p.vec} ilp{p.ilp}"
    return f"rows {p.strategy} vec{p.vec} u{p.unroll} {'1-pass' if p.onepass else '2-pass'}"


def describe_all(params: list[KernelParams], groups: list[Group]) -> str:
    """Every group's settings, a run of equal ones once with its count (`pw vec4 ilp1 x256`: an unrolled RNN's
    steps), and 'graph' when the forward is replayed as a CUDA graph."""
    parts: list[list] = []
    for text in (describe(p, g) for p, g in zip(params, groups, strict=True)):
        if parts and parts[-1][0] == text:
            parts[-1][1] += 1
        else:
            parts.append([text, 1])
    shown = [text if n == 1 else f"{text} x{n}" for text, n in parts]
    return "; ".join(shown) + ("; graph" if params and params[0].graph else "")
