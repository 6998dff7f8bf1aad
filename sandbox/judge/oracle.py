"""The judge's knowledge of one problem: every draw's inputs, the float64 truth, eager's own error.

Computed once per (problem, device, seed) in the judge process, where no candidate code runs, and
reused by every candidate of the problem. Inputs and truth stay on the device when they fit
(comparisons then never leave it); a problem too large for that makes them again on the device when a call
needs them where that is cheap and exact, else keeps them in host memory (residency.py).
`get_inputs()` runs here only: a runner receives input *values*, so a candidate cannot patch the
problem module to compute answers while inputs are drawn.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kevolve.records import Problem
from kevolve.sandbox.common import harness as h
from kevolve.sandbox.common.protocol import Draw, DrawReport, OutputSpec
from kevolve.sandbox.judge.checks import fingerprint
from kevolve.sandbox.judge.draws import DrawData, errors_and_truth, timing_draws
from kevolve.sandbox.judge.draws import again as forward_again
from kevolve.sandbox.judge.reference import OWN_VARIATION_MAX, _Float64, _work, own_variation, with_own_variation
from kevolve.sandbox.judge.fitting import (fit_draws, judge_bytes, meta_sizes, nbytes, param_bytes, pinned_bytes,
                                            residency_of)
from kevolve.sandbox.judge.residency import Pristine, Remake, eligible, kept, pinned, tensors

FRESH = 3  # draws a runner has never seen, timed once each (caches keyed on input content show)



def make_draws(base: int, n: int) -> tuple[Draw, ...]:
    """`n` plain draws, then the shifted ones (negated, ×8, standard normal, ×128: past float32 `exp`'s
    overflow at 88.7, where a softmax or log-sum-exp without the max subtracted breaks; a draw whose
    reference output is not finite is dropped as unusable)."""
    ident = [Draw(key=f"d{i}", seed=base + 1 + i) for i in range(n)]
    shifted = [Draw(key=t, seed=base + 101 + i, transform=t)  # type: ignore[arg-type]
               for i, t in enumerate(("negate", "scale", "normal", "wide"))]
    return tuple(ident + shifted)


def fresh_draws(n: int = FRESH) -> tuple[Draw, ...]:
    """Plain draws under seeds nobody can predict (not derived from the problem's seed)."""
    return tuple(Draw(key=f"f{i}", seed=int.from_bytes(os.urandom(4), "little") >> 1) for i in range(n))


@dataclass
class ProblemState:
    """Everything the judge keeps about a problem between candidates."""

    problem: Problem
    seed: int
    module: ModuleType
    init_args: list[Any]
    draws: dict[str, DrawData]
    unusable: list[DrawReport]  # shifted draws where the reference itself is not finite
    specs: tuple[OutputSpec, ...]
    residency: str
    min_bytes: int | None
    flops: int | None
    phase_s: dict[str, float] = field(default_factory=dict)
    aliases_inputs: bool = False  # the reference's outputs share memory with its inputs (then a candidate's may)
    _prints: dict[str, tuple[int, ...]] = field(default_factory=dict)
    remade_s: float = 0.0  # the judge's own time making draws again: a session's deadline moves by it (session.py)

    def truth_prints(self, device: torch.device) -> dict[str, tuple[int, ...]]:
        """Each draw's truth fingerprinted (checks.classify tells a stale answer by it), computed once; a draw made
        again gets its print when its truth is made (`truth_of`), so one never made has none."""
        for k, d in self.draws.items():
            if k not in self._prints and d.remake is None:
                self._prints[k] = fingerprint([t.to(device) for t in d.truth])
        return self._prints

    def inputs_of(self, key: str) -> list[Any]:
        """A draw's pristine inputs: kept, or made again (residency "regenerated") and checked against their print."""
        d, t0 = self.draws[key], time.perf_counter()
        if d.remake is None:
            return d.inputs
        x = d.remake.inputs(d.draw)
        if not d.input_print:  # a timing draw made for the first time (_remade_timing): later makings match it
            d.input_print = fingerprint(tensors(x))
        elif fingerprint(tensors(x)) != d.input_print:
            raise h.StageError("problem_error", f"get_inputs() gave other values when draw {key} was made again")
        self.remade_s += time.perf_counter() - t0
        return x

    def truth_of(self, key: str) -> list[torch.Tensor]:
        """A draw's truth, where it is kept, or made again on the device."""
        d = self.draws[key]
        if d.remake is None:
            return d.truth
        x, t0 = self.inputs_of(key), time.perf_counter()
        truth = d.remake.truth(d.draw, x)
        self._prints.setdefault(key, fingerprint(truth))
        self.remade_s += time.perf_counter() - t0
        return truth

    def pristine(self, keys: list[str] | None = None) -> Pristine:
        """The draws' inputs for a runner's slots (Slots): made when a slot is filled where they are not kept."""
        return Pristine(self, list(self.draws) if keys is None else keys)

    @property
    def pool(self) -> list[str]:
        """Plain draws whose inputs timed calls rotate through (at most four)."""
        return [k for k, d in self.draws.items() if d.draw.transform == "identity" and k.startswith("d")][:4]

    def call_bytes(self, outputs: bool = True) -> int:
        """Bytes one call reads (a pool draw's inputs) and, with `outputs`, stages (its outputs)."""
        first = self.draws[self.pool[0]] if self.pool else next(iter(self.draws.values()))
        out = sum(t.numel() * t.element_size() for t in first.truth) if outputs else 0
        return nbytes(first.inputs) + out

    def keys(self, kind: str) -> list[str]:
        if kind == "fresh":
            return [k for k in self.draws if k.startswith("f")]
        if kind == "timing":  # each timed once, never seen before (TIMING_MAX)
            return [k for k in self.draws if k.startswith("t")]
        if kind == "plain":
            return [k for k, d in self.draws.items() if k.startswith("d")]
        return [k for k, d in self.draws.items() if d.draw.transform != "identity"]


def _shares_memory(outputs: list[Any], inputs: Any) -> bool:
    """Whether an output's storage overlaps an input's (the reference returns a view of its input)."""
    def span(t: torch.Tensor) -> tuple[int, int]:
        s = t.untyped_storage()
        return s.data_ptr(), s.data_ptr() + s.nbytes()

    ins = [span(t) for t in inputs if isinstance(t, torch.Tensor)]
    return any(lo < hi2 and lo2 < hi for o in outputs if isinstance(o, torch.Tensor)
               for lo, hi in [span(o)] for lo2, hi2 in ins)


def prepare(problem: Problem, seed: int, n_draws: int, device: torch.device, scratch: Path,
            memory_limit: int | None = None, make_room: Callable[[int], None] | None = None) -> ProblemState:
    """Load the problem, draw every input set, compute eager output and float64 truth for each.

    Raises StageError('problem_error') for a problem that is itself broken, and one whose reason is
    `memory_limit: …` for a problem whose data would not fit in `memory_limit` bytes of host memory
    (checked before anything problem-sized is allocated where the shapes can be had on the meta device,
    else on the first draw, before its float64 truth). A problem that fits with fewer draws gets fewer.

    `make_room(nbytes)`: called when the draws are to be kept in host memory (too large for the device's
    share), with the pinned host memory they will take, before any of it is allocated: the judge then
    lets go of other problems' host copies if the machine has no room for both.
    """
    t0 = time.perf_counter()
    try:
        module = h.load_module(problem.source, "kevolve_problem", scratch)
    except Exception as e:  # noqa: BLE001
        raise h.StageError("problem_error", f"problem file failed to import: {h.one_line(e)}") from None
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise h.StageError("problem_error", f"problem file defines no {name}")
    torch.manual_seed(seed)
    try:
        init_args = list(module.get_init_inputs())
    except Exception as e:  # noqa: BLE001
        raise h.StageError("problem_error", f"get_init_inputs() raised {h.one_line(e)}") from None
    plan = list(make_draws(seed, n_draws) + fresh_draws())
    host_kept = device.type == "cpu"  # where a draw's inputs and truth live in host memory from the start
    if memory_limit and host_kept and (sizes := meta_sizes(module, init_args)):
        plan = fit_draws(plan, 0, sizes, memory_limit)
    model = h.build_model(module.Model, module, seed, device, "Model")
    f64 = _Float64(model, device)
    spent = {"reference_load": time.perf_counter() - t0, "reference_draws": 0.0, "reference_truth": 0.0,
             # reference_truth's parts, to see where a 6.4 GB problem's 48 s go (H200, 2026-11-28): the float64
             # forward, eager's error and the rounded truth, the host copies of a host-resident problem
             "reference_truth_f64": 0.0, "reference_truth_f64_cpu": 0.0, "reference_truth_errors": 0.0,
             "reference_truth_host": 0.0, "reference_truth_remake": 0.0,
             "reference_again": 0.0}
    draws: dict[str, DrawData] = {}
    unusable: list[DrawReport] = []
    specs: tuple[OutputSpec, ...] = ()
    residency = "device"
    remake: Remake | None = None  # residency "regenerated": every draw made again when used (residency.py)
    prints: dict[str, tuple[int, ...]] = {}
    need_pins = 0
    cut: list[Draw] = []  # the draws a host-resident problem does without
    aliases = False
    varies: bool | None = None  # does a second forward on the same inputs differ? (the first usable draw says)
    while plan:
        d = plan.pop(0)
        t1 = tw = time.perf_counter()
        x = h.draw_inputs(module, d, device)
        spent["reference_draws"] += time.perf_counter() - t1
        try:
            with torch.no_grad():
                y = [t.detach() for t in h.flatten_outputs(model(*x))]
        except Exception as e:  # noqa: BLE001
            if d.transform == "identity":
                raise h.StageError("problem_error", f"Model.forward raised {h.one_line(e)}") from None
            unusable.append(DrawReport(key=d.key, finite=False))
            continue
        if not all(isinstance(t, torch.Tensor) for t in y):
            raise h.StageError("problem_error", "Model.forward must return tensors")
        if memory_limit and host_kept and not draws:  # the real sizes, before the float64 truth
            plan = fit_draws(plan, 1, (nbytes(x), nbytes(y), param_bytes(model)), memory_limit)
        finite = all(bool(torch.isfinite(t).all()) for t in y if t.is_floating_point())
        if not finite and d.transform != "identity":
            unusable.append(DrawReport(key=d.key, finite=False))  # the reference itself breaks here
            continue
        if not specs:
            specs = tuple(OutputSpec(shape=tuple(t.shape), dtype=str(t.dtype)) for t in y)
            aliases = _shares_memory(y, x)
            residency = residency_of(x, y, len(plan) + 1, device)
            if residency == "host":  # too large to keep every draw: two plain, one shifted, one fresh
                cut = [p for p in plan if p.key not in ("d1", "negate", "f0")]
                plan = [p for p in plan if p.key in ("d1", "negate", "f0")]
                need_pins = (len(plan) + 1) * (pinned_bytes(x) + pinned_bytes(y))
        t1 = time.perf_counter()
        again = forward_again(model, x) if varies is not False else None
        tw += time.perf_counter() - t1  # not part of making the draw again
        spent["reference_again"] += time.perf_counter() - t1
        if varies is None:
            varies = again is not None and not all(torch.equal(a, b) for a, b in zip(y, again, strict=True)
                                                   if isinstance(b, torch.Tensor))
            if varies and (moved := own_variation(y, again)) > OWN_VARIATION_MAX:  # type: ignore[arg-type]
                raise h.StageError("problem_error", (
                    f"Model.forward gives other outputs on the same inputs ({moved:.2g} apart, relative; more than "
                    f"{OWN_VARIATION_MAX:g}): a random forward (dropout in training mode, noise drawn each call) has "
                    "no truth to judge a candidate against (draw the noise in get_inputs, or give the forward a fixed "
                    "generator)"))
        if not varies:
            again = None  # gone before the float64 run: the largest problems' outputs are GBs each
        t1 = time.perf_counter()
        y64 = f64(x)
        if y64 is not None and [t.shape for t in y64] != [t.shape for t in y]:
            y64 = None
        t2 = _synced(device)
        on_host = device.type == "cuda" and y64 is not None and any(t.device.type == "cpu" for t in y64)
        spent["reference_truth_f64_cpu" if on_host else "reference_truth_f64"] += t2 - t1  # cpu: the device had no room
        errs, truth = errors_and_truth(y, y64, device)
        if varies and again is not None:
            errs = with_own_variation(errs, y, again)
        del again
        t3 = _synced(device)
        spent["reference_truth_errors"] += t3 - t2
        report = DrawReport(key=d.key, finite=finite, eager_err=errs,
                            eager_vs_f64=None if y64 is None else max((e[0] for e in errs), default=0.0))
        del y, y64  # before a second copy is made below: a 6.4 GB problem's float64 result is 12.8 GB
        if residency == "host" and not draws:  # made again when used where that is cheap and exact, else pinned
            maker = Remake(module, model, f64, device, lambda a, b: errors_and_truth(a, b, device)[1], truth)
            if os.environ.get("KEVOLVE_RESIDENCY") != "pinned" and eligible(
                    model, varies, t3 - tw, nbytes(x), nbytes(truth), device) and maker.same(d, x, truth):
                residency, remake = "regenerated", maker
                plan += [p for p in cut if p.key.startswith("f")]  # every never-seen draw (no memory): evidence on
                # one no call saw, input_cache on more than one (red team 6 a04b: a memo's evidence on a seen draw)
            elif make_room is not None:
                if device.type == "cuda":
                    torch.cuda.empty_cache()  # what a failed second copy left cached
                make_room(need_pins)
            spent["reference_truth_remake"] += _synced(device) - t3
            t3 = time.perf_counter()
        if residency == "host":
            x, truth = pinned(x), pinned(truth)
            spent["reference_truth_host"] += _synced(device) - t3
        if remake is not None:
            prints[d.key], x_print = fingerprint(truth), fingerprint(tensors(x))
            draws[d.key] = DrawData(d, *kept(x, truth), report, remake, x_print)
        else:
            draws[d.key] = DrawData(d, x, truth, report)
        spent["reference_truth"] += time.perf_counter() - t1
    if residency == "device" and draws:  # CPU and GPU: every timed call on values never seen (clock.py)
        t1, threads = time.perf_counter(), torch.get_num_threads()
        try:
            timing_draws(draws, module, model, f64, device, memory_limit, bool(varies))
        finally:
            torch.set_num_threads(threads)
        spent["reference_timing_draws"] = time.perf_counter() - t1
    t1 = time.perf_counter()
    with torch.no_grad():
        first = next(iter(draws.values()))
        first_x = first.inputs if first.remake is None else first.remake.inputs(first.draw)
        min_bytes, flops = _work(model, h.to_device(first_x, device))
        del first_x
    spent["reference_work"] = time.perf_counter() - t1
    del model, f64
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return ProblemState(problem, seed, module, init_args, draws, unusable, specs, residency, min_bytes, flops,
                        {"reference_outputs": time.perf_counter() - t0, **spent}, aliases_inputs=aliases,
                        _prints=prints)


def _synced(device: torch.device) -> float:
    """perf_counter once the device's queued work is done, so a sub-phase is charged its own kernels."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


__all__ = ["DrawData", "FRESH", "ProblemState", "fit_draws", "fresh_draws", "judge_bytes", "make_draws", "pinned_bytes",
           "prepare"]
