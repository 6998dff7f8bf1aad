"""CPU coverage of the offline proposer: for a problem, does it get a candidate that can be right?

Without a GPU, "covered" means: the problem traces, partitions and renders into a candidate (at its
real shapes) that the judge's candidate policy accepts (every variant, default allowances); the IR computes what the module computes (`interpret.py` against the module's eager
output on the CPU, on sizes shrunk by `shrink.py` so this takes seconds); and every generated kernel
compiles with NVRTC for compute_90, under the default parameters and under every strategy a row
kernel can take. It says nothing about speed, and a GPU run can still find a kernel wrong.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

log = logging.getLogger(__name__)

STRATEGIES = ("block", "warp", "thread", "split")


class Verdict(StrEnum):
    COVERED = "covered"
    NO_CANDIDATE = "no_candidate"
    """tracing failed or nothing to generate a kernel for"""
    IR_MISMATCH = "ir_mismatch"
    """the IR run with torch twins differs from the module's output"""
    COMPILE_ERROR = "compile_error"
    """a generated kernel does not compile with NVRTC"""
    POLICY = "policy"
    """the judge's candidate policy refuses a generated source (the evaluation would end before it ran)"""
    CHECK_FAILED = "check_failed"
    """the check itself could not run (shrinking, the reference on the CPU, a bug of the generator)"""


@dataclass(frozen=True)
class Coverage:
    """One problem's coverage verdict."""

    verdict: Verdict
    reason: str = ""
    """one line; empty when covered"""
    groups: tuple[str, ...] = ()
    """the generated kernels, one description each"""
    max_err: float | None = None
    """largest absolute difference between the IR's and the module's output (shrunk sizes)"""
    sources: int = 0
    """candidate sources compiled (defaults plus strategy variants)"""
    seconds: float = 0.0


def _cuda(src: str) -> str:
    m = re.search(r"_KV_SRC = r'''(.*?)'''", src, re.DOTALL)
    assert m is not None, "a generated source always carries _KV_SRC"
    return m.group(1)


def variants(p: object) -> list[str]:
    """The candidate sources to compile: defaults, each row strategy for every row group, two-pass scalar
    and split float2 walks, and a second setting of the direct kernels' knobs (block, output channels
    per thread, unrolling)."""
    from kevolve.offline.generate import Plan

    assert isinstance(p, Plan)
    out = [p.source()]
    rows = [not f.group.is_pointwise and f.group.kind == "fused" for f in p.fused]
    if any(rows):
        for s in STRATEGIES:
            ps = [replace(x, strategy=s) if r else x for x, r in zip(p.defaults(), rows, strict=True)]
            out.append(p.source(ps))
        for change in ({"onepass": False, "vec": 1, "unroll": 1}, {"strategy": "split", "vec": 2, "unroll": 4}):
            ps = [replace(x, **change) if r else x for x, r in zip(p.defaults(), rows, strict=True)]
            out.append(p.source(ps))  # two walks with scalar loads; vectors and loads in flight across split rows
    direct = [f.group.kind not in ("fused", "gemm") for f in p.fused]
    if any(direct):
        ps = [replace(x, block=128, ilp=2, unroll=4) if d else x for x, d in zip(p.defaults(), direct, strict=True)]
        out.append(p.source(ps))
    return list(dict.fromkeys(out))


def policy_refusal(sources: list[str]) -> str:
    """'' when the candidate policy (sandbox/policy, default allowances) accepts every source, else its reason: the
    judge refuses such a candidate before it runs (L3 48/49's `import einops.einops` was found so on the H100)."""
    from kevolve.sandbox.policy.candidate import check_policy

    for src in sources:
        if (v := check_policy(src)) is not None:
            return v.reason
    return ""


def together(sources: list[str]) -> str:
    """The CUDA of several candidate sources as one program (kernels renamed apart), so that one
    NVRTC call compiles them all."""
    from kevolve.offline.kernels_cuda.cuda import PRELUDE

    parts = [PRELUDE]
    for i, src in enumerate(sources):
        cuda = _cuda(src)
        assert PRELUDE in cuda, "generated CUDA starts with the prelude"
        parts.append(cuda.replace(PRELUDE, "").replace("kv_fused_", f"kv_v{i}_"))
    return "\n".join(parts)


def compile_all(sources: list[str]) -> str:
    """'' when every kernel of every source compiles (and the Python parses), else the first error."""
    from kevolve.sandbox.build.compile import nvrtc_compile

    for src in sources:
        try:
            compile(src, "<candidate>", "exec")
        except SyntaxError as e:
            return f"python: {e}"
    ok, text = nvrtc_compile(together(sources), arch="compute_90")
    if not ok:
        first = next((ln for ln in text.splitlines() if "error" in ln), text.strip()[:200])
        return f"nvrtc: {first.strip()[:200]}"
    return ""


def reference(problem: object, seed: int = 0) -> tuple[object, list[object]]:
    """The module (eval mode; batch-norm running statistics that are not 0 / 1) and one draw of its inputs."""
    import torch
    from kevolve.offline.graph.trace import load_namespace

    ns = load_namespace(problem)  # type: ignore[arg-type]
    torch.manual_seed(seed)
    model = ns["Model"](*ns["get_init_inputs"]()).eval()
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
            m.running_mean.normal_()  # running stats that are not 0 / 1 check the formula
            m.running_var.uniform_(0.5, 2.0)
    torch.manual_seed(seed + 1)
    return model, list(ns["get_inputs"]())


def ir_error(problem: object) -> tuple[str, float | None]:
    """('' or why not, max abs error) of the IR against the module, at the problem's own sizes."""
    import torch
    from kevolve.offline.generate import plan
    from kevolve.offline.graph.interpret import run_plan

    p = plan(problem)  # type: ignore[arg-type]
    model, inputs = reference(problem)
    with torch.no_grad():
        want = model(*inputs)
        got = run_plan(p, model, inputs)  # type: ignore[arg-type]
    if not isinstance(want, torch.Tensor) or not isinstance(got, torch.Tensor):
        return "the module does not return one tensor", None
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"output {tuple(got.shape)} {got.dtype} != module's {tuple(want.shape)} {want.dtype}", None
    if not want.is_floating_point():
        bad = int((got != want).sum())
        return (f"{bad} of {want.numel()} integer outputs differ" if bad else ""), float(bad)
    finite = torch.isfinite(want)
    if not torch.equal(torch.isfinite(got), finite):
        return "non-finite values where the module has finite ones (or the reverse)", None
    return ir_mismatch(got, want, coarsest_dtype(p, want.dtype))


def ir_mismatch(got: Any, want: Any, coarse: Any) -> tuple[str, float]:
    """('' or why not, max abs error) of the IR's floating output against the module's (same shape and dtype,
    finite in the same places), at the tolerance of `coarse`, the least precise dtype the module computes in."""
    import torch

    finite = torch.isfinite(want)
    if want.dtype in (torch.bfloat16, torch.float16):
        got, want = got.float(), want.float()
    err = (got - want).abs()
    if coarse in (torch.bfloat16, torch.float16):
        # The dtype's machine epsilon (bf16 2^-7, fp16 2^-10) of the element, plus that of a quarter of the
        # output's largest magnitude. The IR rounds each group's result once, eager after every op, so an
        # element can differ by one-ulp flips of intermediates, which later products and sums carry on: the
        # first term is one to two ulps of the element itself; the second covers an element that cancellation
        # left smaller than the intermediate that flipped. Measured over 6 draws of the GPT-2 block and the
        # bf16 / fp16 fixtures: 0.07% of elements differ, none needing more than 0.08 x eps x max |want|
        # beyond its own eps x |want| (so a quarter is a 3x margin); a lost bias or a wrong norm is far over.
        rel = torch.finfo(coarse).eps
        scale = float(want[finite].abs().max()) if finite.any() else 0.0
        tol = rel * (want.abs() + scale / 4)
        what = f"{rel:.3g} x (|want| + max |want| / 4) ({coarse} somewhere in the module)"
    else:
        tol = 1e-4 + 1e-4 * want.abs()
        what = "rtol=atol=1e-4"
    worst = float(err[finite].max()) if finite.any() else 0.0
    if bool((err[finite] > tol[finite]).any()):
        return f"max abs error {worst:.3g} over {what}", worst
    return "", worst


def coarsest_dtype(p: object, out: object) -> object:
    """The floating dtype of least precision among the traced graph's values and the output: a module that
    computes anything in bf16 or fp16 is compared at that precision (fp32 modules keep fp32's tolerance)."""
    import torch
    from kevolve.offline.graph.meta import node_dtype

    dts = {node_dtype(n) for n in p.traced.gm.graph.nodes} | {out}  # type: ignore[attr-defined]
    floats = [d for d in dts if isinstance(d, torch.dtype) and d.is_floating_point]
    return max(floats, key=lambda d: torch.finfo(d).eps, default=out)


def check(problem: object, shrunk: object | None = None) -> Coverage:
    """The coverage verdict of one problem; `shrunk` is the same problem at smaller sizes (the IR
    check runs on it; the problem itself is checked when None)."""
    from kevolve.offline.generate import plan
    from kevolve.offline.graph.trace import TraceError

    t0 = time.monotonic()
    try:
        p = plan(problem)  # type: ignore[arg-type]
    except TraceError as e:
        return Coverage(Verdict.NO_CANDIDATE, str(e)[:300], seconds=time.monotonic() - t0)
    groups = tuple(f.group.describe() for f in p.fused)
    try:
        sources = variants(p)
    except Exception as e:  # noqa: BLE001 — a generator bug is a verdict here, reported with its type
        return Coverage(Verdict.CHECK_FAILED, f"render: {type(e).__name__}: {e}"[:300], groups)
    why = policy_refusal(sources)
    if why:
        return Coverage(Verdict.POLICY, why, groups, sources=len(sources), seconds=time.monotonic() - t0)
    why = compile_all(sources)
    if why:
        return Coverage(Verdict.COMPILE_ERROR, why, groups, sources=len(sources), seconds=time.monotonic() - t0)
    try:
        why, err = ir_error(shrunk if shrunk is not None else problem)
    except TraceError as e:
        why, err = f"at shrunk sizes: {e}", None
    except Exception as e:  # noqa: BLE001
        first = (str(e).splitlines() or [""])[0]
        return Coverage(Verdict.CHECK_FAILED, f"ir check: {type(e).__name__}: {first}"[:300], groups,
                        sources=len(sources), seconds=time.monotonic() - t0)
    verdict = Verdict.IR_MISMATCH if why else Verdict.COVERED
    return Coverage(verdict, why[:300], groups, err, len(sources), time.monotonic() - t0)


def check_file(path: str) -> Coverage:
    """The verdict of one problem file: checked at its sizes, its IR at shrunk sizes."""
    from kevolve.offline.graph.shrink import shrink
    from kevolve.contract import load_problem, problem_from_source

    problem = load_problem(path)
    try:
        shrunk = problem_from_source(shrink(problem.source), path)
    except Exception as e:  # noqa: BLE001 — the IR is then checked at the real sizes
        shrunk = None
        log.info("%s: not shrunk (%s: %s)", path, type(e).__name__, e)
    return check(problem, shrunk)


def _child(path: str, conn: Any) -> None:
    try:
        cov = check_file(path)
    except Exception as e:  # noqa: BLE001
        cov = Coverage(Verdict.CHECK_FAILED, f"{type(e).__name__}: {e}"[:300])
    conn.send(asdict(cov))
    conn.close()


class Child:
    """One problem file being checked in a child process, forked from a server that has torch
    loaded but has run nothing (forking a process whose OpenMP threads ran can deadlock)."""

    def __init__(self, path: str) -> None:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["torch", "kevolve.offline.coverage"])
        self.recv, send = ctx.Pipe(duplex=False)
        self.t0 = time.monotonic()
        self.proc = ctx.Process(target=_child, args=(path, send), daemon=True)
        self.proc.start()
        send.close()

    def result(self, timeout: float) -> dict | None:
        """The coverage record (a dict of Coverage's fields) once the child has answered, died or run
        past `timeout` seconds; None while it is still working."""
        got = self.recv.recv() if self.recv.poll(0) else None
        late = time.monotonic() - self.t0 > timeout
        if got is None and self.proc.is_alive() and not late:
            return None
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        if got is None:
            why = f"timed out after {timeout:.0f} s" if late else f"child died (exit {self.proc.exitcode})"
            got = asdict(Coverage(Verdict.CHECK_FAILED, why))
        got["seconds"] = round(time.monotonic() - self.t0, 2)
        return got


def check_files(items: list[tuple[Any, str | None, str]], timeout: float, jobs: int) -> Iterator[tuple[Any, dict]]:
    """(key, record) for each (key, path, reason) in order, `jobs` children at a time; an item without a
    path is reported as check_failed with its reason (a problem that could not be loaded)."""
    pending, running, done = list(items), {}, {}
    order = [key for key, _, _ in items]
    while pending or running:
        while pending and len(running) < jobs:
            key, path, why = pending.pop(0)
            if path is None:
                done[key] = asdict(Coverage(Verdict.CHECK_FAILED, why))
            else:
                running[key] = Child(path)
        for key, child in list(running.items()):
            got = child.result(timeout)
            if got is not None:
                done[key] = got
                del running[key]
        while order and order[0] in done:
            key = order.pop(0)
            yield key, done.pop(key)
        time.sleep(0.05)
