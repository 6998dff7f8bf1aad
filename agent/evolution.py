"""Evolution: islands, parent selection, repair policy, elitism, migration, novelty, job planning,
stop rules.

Pure functions of the run's trials (plus a seeded RNG), so that the graph's nodes stay thin and
every rule is tested with hand-built trials.
"""

from __future__ import annotations

import difflib
import random
import re
import threading
from collections.abc import Iterable, Sequence
from typing import Literal

from kevolve.agent.budget import NextCost, budget_reason
from kevolve.agent.config import EvolutionConfig, StopConfig
from kevolve.agent.state import Job, Trial
from kevolve.records import Origin, Outcome

_C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def normalize_source(source: str) -> str:
    """Source without comments and whitespace runs: what 'the same code' means for novelty.

    Python comments go (tokenize), and C/C++/CUDA comments inside string literals; a '#' inside a
    string is a preprocessor line (#define TILE 64), which is code."""
    import io
    import tokenize

    parts: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                continue
            parts.append(_C_COMMENT.sub(" ", tok.string) if tok.type == tokenize.STRING else tok.string)
    except (tokenize.TokenError, SyntaxError):
        parts = [source]
    return "".join("".join(parts).split())  # no whitespace at all: layout never makes code new


def similarity(a: str, b: str) -> float:
    """0..1 similarity of two normalized sources."""
    if a == b:
        return 1.0
    m = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return m.ratio() if m.real_quick_ratio() > 0.5 and m.quick_ratio() > 0.5 else 0.0


def near_duplicate(a: str, b: str, threshold: float) -> bool:
    """Same code up to comments and whitespace; with threshold < 1, also any pair at least that similar.

    The default (1.0) keeps one-token changes (a tile size, a block count) apart: in a 3,000-character
    kernel they are worth evaluating, yet any ratio-based threshold would call them duplicates."""
    return a == b or (threshold < 1.0 and similarity(a, b) >= threshold)


class NoveltyIndex:
    """Sources already proposed in this run; `claim` is atomic, for proposals made concurrently."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._seen: dict[str, str] = {}
        self._lock = threading.Lock()

    def sync(self, trials: Iterable[Trial]) -> None:
        """Rebuild from the run's trials (the index itself is never checkpointed)."""
        with self._lock:
            self._seen = {t.candidate.id: normalize_source(t.candidate.source)
                          for t in trials if t.candidate is not None and t.status == "evaluated"}

    def claim(self, cand_id: str, source: str) -> str | None:
        """Register `source`; if it is a near-duplicate of a known one, return that one's id instead."""
        norm = normalize_source(source)
        with self._lock:
            for other_id, other in self._seen.items():
                if other_id == cand_id or near_duplicate(norm, other, self.threshold):
                    return other_id
            self._seen[cand_id] = norm
        return None


def by_id(trials: Iterable[Trial]) -> dict[str, Trial]:
    """Evaluated trials by candidate id."""
    return {t.candidate.id: t for t in trials if t.candidate is not None and t.evaluation is not None}


def _fitness(t: Trial) -> float:
    """Evaluation.fitness: the speedup, or the launch-inclusive one where that is lower."""
    return t.evaluation.fitness if t.evaluation is not None else 0.0


def update_islands(islands: list[list[str]], new: Sequence[Trial], trials: dict[str, Trial],
                   cfg: EvolutionConfig) -> list[list[str]]:
    """Add each new correct candidate to its island; keep the elites and the fastest up to the size."""
    out = [list(members) for members in islands] or [[] for _ in range(cfg.islands)]
    for t in new:
        if t.ok and t.candidate is not None and t.candidate.id not in out[t.job.island]:
            out[t.job.island].append(t.candidate.id)
    for i, members in enumerate(out):
        ranked = sorted(members, key=lambda c: _fitness(trials[c]), reverse=True)
        out[i] = ranked[:cfg.population]
    return out


def migrate(islands: list[list[str]], trials: dict[str, Trial], cfg: EvolutionConfig) -> list[list[str]]:
    """Ring migration: each island's best joins the next island (if it is not there already)."""
    out = [list(m) for m in islands]
    for i, members in enumerate(islands):
        if not members:
            continue
        best = max(members, key=lambda c: _fitness(trials[c]))
        dst = out[(i + 1) % len(out)]
        if best not in dst:
            dst.append(best)
    return update_islands(out, (), trials, cfg)


def tournament(members: Sequence[str], trials: dict[str, Trial], rng: random.Random, size: int,
               exclude: str | None = None) -> str:
    """Parent selection: the fastest of `size` members drawn at random. Favours fast candidates,
    yet any member can win a draw without faster rivals, so diversity survives."""
    pool = [m for m in members if m != exclude] or list(members)
    drawn = rng.sample(pool, min(size, len(pool)))
    return max(drawn, key=lambda c: _fitness(trials[c]))


# Failures worth a repair: the candidate's own fault, with a log or mismatch to show the LLM.
_REPAIRABLE = {Outcome.COMPILE_ERROR, Outcome.INCORRECT, Outcome.RUNTIME_ERROR, Outcome.REJECTED,
               Outcome.TIMEOUT, Outcome.CRASHED}


def next_step(trial: Trial, max_repairs: int) -> Literal["evolve", "repair", "drop"]:
    """A correct candidate goes to evolution; a failed one to repair (with its compiler log or its
    mismatch) while its lineage has repairs left; anything else is dropped."""
    ev = trial.evaluation
    if ev is None:
        return "drop"
    if ev.ok:
        return "evolve"
    if ev.outcome in _REPAIRABLE and trial.repair_depth < max_repairs:
        return "repair"
    return "drop"


def repair_jobs(last: Sequence[Trial], cfg: EvolutionConfig, generation: int) -> list[Job]:
    """A repair for each failed candidate of the last generation whose lineage may still be repaired."""
    jobs = []
    for t in last:
        if t.candidate is not None and next_step(t, cfg.max_repairs) == "repair":
            jobs.append(Job(id="", operator=Origin.REPAIR, island=t.job.island, generation=generation,
                            parent_ids=(t.candidate.id,)))
    return jobs


def evolve_jobs(islands: list[list[str]], trials: dict[str, Trial], cfg: EvolutionConfig, n: int,
                generation: int, rng: random.Random) -> list[Job]:
    """`n` mutate / crossover / translate jobs spread round-robin over the islands."""
    jobs = []
    for k in range(n):
        isl = k % cfg.islands
        members = islands[isl] if isl < len(islands) else []
        if not members:
            jobs.append(Job(id="", operator=Origin.TRANSLATE, island=isl, generation=generation))
        elif k // cfg.islands < cfg.elites:
            # Elitism: each island's best members are mutated every generation, whatever the draws say.
            elite = sorted(members, key=lambda c: _fitness(trials[c]), reverse=True)[k // cfg.islands % len(members)]
            jobs.append(Job(id="", operator=Origin.MUTATE, island=isl, generation=generation, parent_ids=(elite,)))
        elif len(members) >= 2 and rng.random() < cfg.crossover_rate:
            a = tournament(members, trials, rng, cfg.tournament)
            b = tournament(members, trials, rng, cfg.tournament, exclude=a)
            jobs.append(Job(id="", operator=Origin.CROSSOVER, island=isl, generation=generation, parent_ids=(a, b)))
        else:
            a = tournament(members, trials, rng, cfg.tournament)
            jobs.append(Job(id="", operator=Origin.MUTATE, island=isl, generation=generation, parent_ids=(a,)))
    return jobs


def plan_jobs(all_trials: Sequence[Trial], islands: list[list[str]], generation: int, budget: int,
              cfg: EvolutionConfig) -> list[Job]:
    """The next generation's jobs: repairs first (bounded per lineage), then evolution, `budget` at most."""
    rng = random.Random(f"{cfg.seed}:{generation}")
    if generation == 0:
        jobs = [Job(id="", operator=Origin.TRANSLATE, island=k % cfg.islands, generation=0)
                for k in range(cfg.jobs_per_generation)]
    else:
        last = [t for t in all_trials if t.job.generation == generation - 1]
        repairs = repair_jobs(last, cfg, generation)
        free = max(0, cfg.jobs_per_generation - len(repairs))
        jobs = repairs + evolve_jobs(islands, by_id(all_trials), cfg, free, generation, rng)
    jobs = jobs[:max(0, budget)]
    return [j.model_copy(update={"id": f"g{generation}-j{i}"}) for i, j in enumerate(jobs)]


def best_candidate(trials: Iterable[Trial]) -> Trial | None:
    """The fastest correct trial (first proposed wins a tie)."""
    ok = [t for t in trials if t.ok]
    return max(ok, key=_fitness) if ok else None


def stop_reason(trials: Sequence[Trial], best_history: Sequence[float], elapsed_s: float,
                generation: int, cfg: StopConfig, call_cost: float | NextCost = 0.0) -> str | None:
    """The first stop rule that fires, as a one-line reason; None to go on. `call_cost`: what the next proposal
    may cost at most (budget.next_cost; a number is its LLM call's dollars)."""
    best = best_history[-1] if best_history else 0.0
    last = [t for t in trials if t.job.generation == generation - 1]
    if last and all(t.status == "llm_error" for t in last):  # the model is down: more generations cannot help
        return f"llm_error: every proposal of generation {generation - 1} failed at the LLM ({last[-1].note[:200]})"
    if cfg.target_speedup is not None and best >= cfg.target_speedup:
        return f"target: reached {best:.2f}x (target {cfg.target_speedup:.2f}x)"
    if over := budget_reason(trials, cfg, call_cost):
        return over
    if cfg.time_limit_s is not None and elapsed_s >= cfg.time_limit_s:
        return f"time_limit: {elapsed_s:.0f}s of {cfg.time_limit_s:.0f}s"
    if generation >= cfg.max_generations:
        return f"max_generations: {generation} generations"
    if len(best_history) > cfg.patience and best > 0:
        before = best_history[-cfg.patience - 1]
        if best <= before * 1.01:
            return f"no_improvement: best {best:.2f}x unchanged for {cfg.patience} generations"
    if len(best_history) >= cfg.patience + 2 and best == 0.0:
        return f"no_correct_candidate: none correct after {len(best_history)} generations"
    return None
