"""Evolutionary parameter search for one problem's offline candidates, measured by an evaluator.

A small (mu + lambda) loop: the defaults of every plan variant first (CUDA kernels beside library
calls; Triton products with fused epilogues), then children made by mutating or crossing the fastest
verified parents' parameters within the winning variant. It stops at a candidate count, at a time
limit, at a budget of evaluation seconds (the GPU time the trials held), or once the best candidate
is near its roofline, where more tuning has little left to find. Used directly by batch scripts; inside `kevolve optimize`
the agent's own loop drives the same operators through `proposer.OfflineGenerator`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from kevolve.kernel_params import KernelParams
from kevolve.offline.generate import Generated, Plan
from kevolve.offline.space import crossover, more_precise, mutate

from kevolve.records import Evaluation, Outcome

log = logging.getLogger(__name__)


@dataclass
class Trial:
    """One evaluated parameter choice."""

    params: list[KernelParams]
    source: str
    evaluation: Evaluation
    technique: str = "cuda"
    """the plan variant that made it (where its lineage started)"""

    @property
    def fitness(self) -> float:
        """Evaluation.fitness: the speedup, or the launch-inclusive one where that is lower."""
        return self.evaluation.fitness

    @property
    def roofline(self) -> float | None:
        """The evaluator's fraction of the nearer roof (memory or compute), where it measured one."""
        prof = self.evaluation.profile
        return None if prof is None else prof.roofline_fraction


@dataclass
class SearchResult:
    """Every trial, best first."""

    trials: list[Trial] = field(default_factory=list)
    stopped: str = ""
    """why the search ended: 'budget', 'time', 'gpu_seconds', 'roofline', 'exhausted', 'defaults_failed'"""

    @property
    def best(self) -> Trial | None:
        ok = [t for t in self.trials if t.evaluation.ok]
        return max(ok, key=lambda t: t.fitness) if ok else None

    @property
    def gpu_seconds(self) -> float:
        """Seconds the evaluations took (each holds the GPU for its whole wall time)."""
        return sum(t.evaluation.wall_s for t in self.trials)


def children(plan: Plan, parents: list[list[KernelParams]], n: int, rng: random.Random,
             seen: set[str]) -> list[list[KernelParams]]:
    """Up to `n` new parameter lists from `parents` (mutation, or crossover when two exist)."""
    out: list[list[KernelParams]] = []
    for _ in range(n * 8):
        if len(out) >= n:
            break
        a = rng.choice(parents)
        if len(parents) > 1 and rng.random() < 0.3:
            b = rng.choice([p for p in parents if p is not a] or parents)
            child = [crossover(x, y, f.group, rng) for x, y, f in zip(a, b, plan.fused, strict=True)]
        else:
            k = rng.randrange(len(plan.fused))  # one kernel changed at a time keeps credit assignment clear
            child = [mutate(x, f.group, rng) if i == k else x for i, (x, f) in enumerate(zip(a, plan.fused, strict=True))]
        key = _key(plan, child)
        if key not in seen:
            seen.add(key)
            out.append(child)
    return out


def _key(plan: Plan, params: list[KernelParams]) -> str:
    return plan.technique + repr(params)


def _new(plan: Plan, best: list[KernelParams], child: list[KernelParams], seen: set[str]) -> list[list[KernelParams]]:
    child = plan.legalize(child)
    if child == best or _key(plan, child) in seen:
        return []
    seen.add(_key(plan, child))
    return [child]


def _split_first(plan: Plan, best: list[KernelParams], seen: set[str]) -> list[list[KernelParams]]:
    """Row groups with fewer rows than SMs leave most of the GPU idle: try splitting their rows first."""
    from kevolve.offline.kernels_cuda.cuda_split import SMS

    child = [replace(p, strategy="split") if not f.group.is_pointwise and f.group.kind == "fused" and
             f.group.rows < SMS and f.group.row_len >= 4 * p.block else p for p, f in zip(best, plan.fused, strict=True)]
    return _new(plan, best, child, seen)


def _channels_last_once(plan: Plan, best: list[KernelParams], seen: set[str]) -> list[list[KernelParams]]:
    """The best candidate with its Triton convolutions reading channels-last input (loads along the channels,
    as cuDNN and Inductor run convolutions fastest), tried once."""
    child = [replace(p, layout="nhwc") if f.group.kind == "tconv" else p for p, f in zip(best, plan.fused, strict=True)]
    return _new(plan, best, child, seen)


def _graph_once(plan: Plan, best: list[KernelParams], seen: set[str]) -> list[list[KernelParams]]:
    """The best candidate replayed as a CUDA graph (once per search; it helps forwards of several launches)."""
    many = len(plan.fused) >= 2 or any(f.group.kind == "rnn" for f in plan.fused)  # a recurrent group: 2 per step
    if not many or best[0].graph:
        return []  # one kernel has no gaps between kernels to save, only the graph's copies to pay
    return _new(plan, best, [replace(p, graph=True) for p in best], seen)


def _precision_fallback(plan: Plan, trial: Trial, seen: set[str]) -> list[list[KernelParams]]:
    """A candidate judged incorrect is tried again with its Triton products one precision more exact (tf32 ->
    tf32x3 -> ieee fp32; only the winning variant evolves, so a variant whose default fails would otherwise
    never get it)."""
    if trial.evaluation.outcome is not Outcome.INCORRECT:
        return []
    child = [more_precise(p, f.group) for p, f in zip(trial.params, plan.fused, strict=True)]
    return _new(plan, trial.params, child, seen)


@dataclass(frozen=True)
class Limits:
    """When the search stops (whichever comes first)."""

    budget: int = 6
    """candidates evaluated"""
    time_limit_s: float | None = None
    """wall seconds after the first evaluation (which also prepares the reference and baselines)"""
    gpu_seconds: float | None = None
    """summed evaluation seconds (the GPU time the trials held)"""
    roofline: float = 0.9
    """stop once the best candidate reaches this fraction of its roofline (after every variant's defaults)"""
    variants: tuple[str, ...] = ()
    """the plan variants' techniques"""


ROOF_TRUSTED = 1.25
"""a roofline fraction above this is not a reason to stop (the roof underestimates what the device does)"""


def _stop(result: SearchResult, limits: Limits, t0: float) -> str:
    best = result.best
    if len(result.trials) >= limits.budget:
        return "budget"
    if limits.time_limit_s is not None and len(result.trials) > 1 and time.monotonic() - t0 > limits.time_limit_s:
        return "time"
    if limits.gpu_seconds is not None and result.gpu_seconds >= limits.gpu_seconds:
        return "gpu_seconds"
    # Only once every variant's defaults ran: on the H100 cuBLAS + an epilogue read 99 % of the fp32
    # roof on every level-2 GEMM, and the Triton variant (TF32x3, above that roof) was never tried.
    # A fraction far above 1 says the roof is wrong, not that the kernel is at it: the compute roof is fp32
    # FMA, and cuDNN's TF32 convolutions read 130-230 % of it (H100 level-2 sample, 2026-11-25), where the
    # search stopped after one candidate.
    tried = {t.technique for t in result.trials}
    if best is not None and best.roofline is not None and limits.roofline <= best.roofline <= ROOF_TRUSTED \
            and tried >= set(limits.variants):
        return "roofline"
    return ""


def search(plans: Plan | Sequence[Plan], evaluate: Callable[[Generated], Evaluation], budget: int = 6,
           population: int = 3, time_limit_s: float | None = None, seed: int = 0, gpu_seconds: float | None = None,
           roofline: float = 0.9) -> SearchResult:
    """Evaluate every variant's defaults, then evolve the best variant until a limit is reached. `evaluate` gets
    each candidate's source with its choice (for `Candidate.offline`)."""
    rng = random.Random(seed)
    variants = [plans] if isinstance(plans, Plan) else list(plans)
    limits = Limits(budget=budget, time_limit_s=time_limit_s, gpu_seconds=gpu_seconds, roofline=roofline,
                    variants=tuple(v.technique for v in variants))
    t0 = time.monotonic()
    result = SearchResult()
    queue = [(v, v.legalize(v.defaults())) for v in variants]
    seen = {_key(v, ps) for v, ps in queue}
    while not (why := _stop(result, limits, t0)):
        if len(result.trials) == 1:
            t0 = time.monotonic()  # the first evaluation also computes the reference and baselines: not search time
        if not queue:
            best = result.best
            if best is None:
                result.stopped = "defaults_failed"  # mutating parameters rarely fixes a wrong kernel
                return result
            plan = next(v for v in variants if v.technique == best.technique)
            ok = sorted((t for t in result.trials if t.evaluation.ok and t.technique == plan.technique),
                        key=lambda t: t.fitness, reverse=True)
            top = ok[0].params
            directed = (_split_first(plan, top, seen) + _channels_last_once(plan, top, seen)
                        + _graph_once(plan, top, seen))
            queue = [(plan, c) for c in directed + children(plan, [t.params for t in ok[:population]], 2, rng, seen)]
            if not queue:
                result.stopped = "exhausted"
                return result
        plan, params = queue.pop(0)
        got = plan.generate(params)
        ev = evaluate(got)
        result.trials.append(Trial(params=params, source=got.source, evaluation=ev, technique=plan.technique))
        queue[:0] = [(plan, c) for c in _precision_fallback(plan, result.trials[-1], seen)]
        log.info("%s: trial %d [%s] %s %s", plan.problem.name, len(result.trials), plan.technique, ev.outcome.value,
                 (f"{ev.speedup:.2f}x" + ("" if ev.speedup_launch is None else f" ({ev.speedup_launch:.2f}x launch work counted)"))
                 if ev.speedup else ev.reason[:100])
    result.stopped = why
    log.info("%s: search stopped (%s)", variants[0].problem.name, why)
    return result
