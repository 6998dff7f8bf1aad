"""Worker task: build, run and time one candidate; hand its outputs back for the parent to judge.

Nothing here decides correctness: outputs go back to the parent as plain CPU tensors and are
compared there against the reference, which never ran in this process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kevolve.sandbox import compile as build
from kevolve.sandbox import cuda_rt
from kevolve.sandbox import harness as h
from kevolve.sandbox import integrity
from kevolve.sandbox.profile import profile_call
from kevolve.sandbox.protocol import CheckResult, Draw, WorkerReport, WorkerRequest
from kevolve.sandbox.timing import Timer

CUDA_ERRORS = ("CUDA error", "illegal memory access", "device-side assert", "CUDA_ERROR", "cudaError",
             "unspecified launch failure", "misaligned address")


# CuPy's CompileException (NVRTC) and Triton's CompilationError are raised at the first launch,
# inside forward: they are compile errors, with the compiler's log, not runtime errors.
_LAZY_COMPILE_ERRORS = {"CompileException", "CompilationError", "NVRTCError"}


def _call(model: Any, x: list[Any], stage: str) -> list[Any]:
    """One forward call; whatever the candidate raises becomes a StageError."""
    try:
        with torch.no_grad():
            return h.flatten_outputs(model(*x))
    except SystemExit as e:
        raise h.StageError("crashed", f"exit: candidate called exit({e.code}) during {stage}") from None
    except KeyboardInterrupt:
        raise h.StageError("crashed", f"exit: candidate raised KeyboardInterrupt during {stage}") from None
    except Exception as e:  # noqa: BLE001
        msg = h.one_line(e)
        if type(e).__name__ in _LAZY_COMPILE_ERRORS:  # CuPy/Triton compile at the first launch
            log = getattr(e, "get_message", lambda: str(e))()
            raise h.StageError("compile_error", f"{msg} (first launch, during {stage})", log[-6000:]) from None
        if any(s in str(e) for s in CUDA_ERRORS):
            raise h.StageError("crashed", f"cuda_error: {msg} (during {stage})", h.short_traceback(e)) from None
        raise h.StageError("runtime_error", f"forward raised {msg} (during {stage})", h.short_traceback(e)) from None


class _Session:
    def __init__(self, req: WorkerRequest, guards: integrity.Guards, scratch: Path) -> None:
        self.req, self.guards, self.scratch = req, guards, scratch
        self.device = h.device_of(req.device)
        self.outs: dict[str, list[torch.Tensor]] = {}
        self.checks: list[CheckResult] = []
        self.phases: dict[str, float] = {}
        # Some drivers set aside persisting L2 by default (seen: 11.25 MB on an H200): only an
        # increase is the candidate's doing.
        self.l2_base = cuda_rt.persisting_l2_limit() if self.device.type == "cuda" else None

    def reject(self, reason: str) -> None:
        raise h.StageError("rejected", reason)

    def guard(self) -> None:
        bad = self.guards.tampered()
        if bad:
            self.reject(f"tampering: candidate replaced {', '.join(bad[:4])}")

    def load(self) -> tuple[Any, Any]:
        h.set_phase(self.scratch, "compile")
        build.install_build_hooks(Path(self.req.cache_dir), Path(self.req.build_dir) if self.req.build_dir else None,
                                  build.build_scope(self.req.candidate_source))
        t0 = time.perf_counter()
        try:
            cand = h.load_module(self.req.candidate_source, "kevolve_candidate", self.scratch)
        except SystemExit as e:
            raise h.StageError("crashed", f"exit: candidate called exit({e.code}) while loading") from None
        except BaseException as e:  # noqa: BLE001 - a failed build or import is a compile error
            raise h.StageError("compile_error", h.one_line(e), h.short_traceback(e, 60)) from None
        self.phases["compile"] = time.perf_counter() - t0
        problem = h.load_module(self.req.problem_source, "kevolve_problem", self.scratch)
        if not isinstance(getattr(cand, "ModelNew", None), type):
            raise h.StageError("compile_error", "solution defines no ModelNew class")
        self.guard()
        model = h.build_model(cand.ModelNew, problem, self.req.init_seed, self.device, "ModelNew")
        return problem, model

    def checked_call(self, model: Any, x: list[Any], key: str) -> list[torch.Tensor]:
        """A call whose output is vetted: types, inputs untouched, no writes after return."""
        before = [t.clone() if isinstance(t, torch.Tensor) else t for t in x]
        threads = integrity.live_threads()
        integrity.poison_allocator(self.req.outputs, self.device)
        y = _call(model, x, "correctness")
        bad = integrity.output_problems(y, self.device)
        if bad:
            self.reject(bad)
        at_return = [t.detach().clone() for t in y]  # stream-ordered: sees only finished work
        h.sync(self.device)
        time.sleep(0.005)
        integrity.settle_threads(threads, 0.5)
        # Copies (on the CPU .cpu() would alias): a candidate that reuses its output buffer on
        # the next call must not rewrite what this call returned.
        final = [t.detach().to("cpu", copy=True) for t in y]
        if any(not _same(a.cpu(), b) for a, b in zip(at_return, final, strict=True)):
            self.reject("async_output: output changed after forward returned "
                        "(work left on a side stream or a background thread)")
        if integrity.live_threads() - threads:
            self.reject("background_thread: forward left a thread running after it returned")
        for i, (a, b) in enumerate(zip(before, x, strict=True)):
            if isinstance(a, torch.Tensor) and not _same(a, b):
                self.reject(f"mutated_inputs: forward modified input {i} in place")
        self.guard()
        self.outs[key] = final
        return final

    def correctness(self, problem: Any, model: Any) -> tuple[list[list[Any]], list[str]]:
        h.set_phase(self.scratch, "correctness")
        t0 = time.perf_counter()
        pool, keys = [], []
        for d in self.req.draws:
            x = h.draw_inputs(problem, d, self.device)
            self.checked_call(model, x, d.key)
            if d.transform == "identity" and len(pool) < 4:
                pool.append(x)
                keys.append(d.key)
        ident = [d for d in self.req.draws if d.transform == "identity"]
        if len(ident) >= 2:  # same buffers, new values: a cache keyed on pointers or shapes shows
            x = h.draw_inputs(problem, ident[0], self.device)
            self.checked_call(model, x, f"{ident[0].key}@again")
            fresh = h.draw_inputs(problem, ident[1], self.device)
            for t, src in zip(x, fresh, strict=True):
                if isinstance(t, torch.Tensor):
                    t.copy_(src)
            self.checked_call(model, x, f"{ident[1].key}@inplace")
        self.phases["correctness"] = time.perf_counter() - t0
        return pool, keys

    def timing(self, problem: Any, model: Any, pool: list[list[Any]], keys: list[str]) -> tuple[Any, list[str]]:
        h.set_phase(self.scratch, "timing")
        t0 = time.perf_counter()
        timed: list[str] = []

        def keep(key: str, out: Any) -> None:
            name = f"{key}@timed{len(timed)}"
            self.outs[name] = [t.detach().to("cpu", copy=True) if isinstance(t, torch.Tensor) else t
                               for t in h.flatten_outputs(out)]
            timed.append(name)

        fn: Callable[..., Any] = _timed_forward(model)
        fresh = [h.draw_inputs(problem, Draw(key=f"fresh{i}", seed=s), self.device)
                 for i, s in enumerate(_private_seeds(_FRESH))]
        timer = Timer(self.device)
        stats = timer.run(fn, pool, keys, self.req.trials, self.req.max_timing_s, self.req.warmup,
                          on_output=keep, fresh=fresh)
        self.guard()
        if timer.fresh_ms and min(timer.fresh_ms) > _CACHE_RATIO * stats.median_ms + _CACHE_SLACK_MS:
            self.reject(f"input_cache: calls on never-seen inputs take {min(timer.fresh_ms):.3f} ms or more, "
                        f"on repeated inputs {stats.median_ms:.3f} ms (results cached by input content)")
        self.phases["timing"] = time.perf_counter() - t0
        return stats, timed


# A cache keyed on input content answers the rotated pool from memory; a few inputs it has never
# seen, timed once each, then cost more than the pool's median by a margin noise does not reach.
_FRESH, _CACHE_RATIO, _CACHE_SLACK_MS = 3, 1.5, 0.05


def _private_seeds(n: int) -> list[int]:
    return [int.from_bytes(os.urandom(4), "little") for _ in range(n)]


def _timed_forward(model: Any) -> Callable[..., Any]:
    def fwd(*x: Any) -> Any:
        return _call(model, list(x), "timing")
    return fwd


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.device != b.device:
        b = b.to(a.device)
    return bool(torch.equal(a.contiguous().view(torch.uint8) if a.numel() else a,
                            b.contiguous().view(torch.uint8) if b.numel() else b))


def run(req: WorkerRequest, guards: integrity.Guards, scratch: Path) -> tuple[WorkerReport, dict[str, list[torch.Tensor]]]:
    # Bound before any candidate code runs: replacing Guards.tampered or _Session.guard later
    # cannot switch off this last check (the snapshot covers both, so it reports them).
    tampered = guards.tampered
    s = _Session(req, guards, scratch)
    try:
        report, outs = _run(s)
        bad = tampered()
        if bad:
            s.reject(f"tampering: candidate replaced {', '.join(bad[:4])}")
        return report, outs
    except h.StageError as e:
        e.phases = s.phases
        raise


def _run(s: _Session) -> tuple[WorkerReport, dict[str, list[torch.Tensor]]]:
    req, scratch = s.req, s.scratch
    problem, model = s.load()
    pool, keys = s.correctness(problem, model)
    stats, timed = s.timing(problem, model, pool, keys)
    prof = None
    if req.profile:
        h.set_phase(scratch, "profile")
        t0 = time.perf_counter()
        res = profile_call(_timed_forward(model), pool[0], s.device, req.custom_kernel_names,
                           build.BUILT_MODULES)
        s.phases["profile"] = time.perf_counter() - t0
        if res.unjoined_stream_kernels:
            s.reject(f"side_stream: kernel {res.unjoined_stream_kernels[0][:60]} still ran on another "
                     "stream after forward returned (timing would miss it)")
        prof = res.profile
    if s.device.type == "cuda":
        limit = cuda_rt.persisting_l2_limit()
        if limit is not None and s.l2_base is not None and limit > s.l2_base:
            s.reject(f"l2_persist: candidate raised the persisting L2 set-aside from {s.l2_base} to {limit} bytes")
    s.guard()
    report = WorkerReport(status="done", device_name=h.device_name(s.device), versions=h.versions(),
                          timing=stats, profile=prof, timed_keys=tuple(timed), checks=tuple(s.checks),
                          compile_s=s.phases.get("compile"), phase_s=s.phases)
    return report, s.outs


__all__ = ["run", "Draw"]
