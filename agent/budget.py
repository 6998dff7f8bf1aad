"""The run's hard limits on proposals, LLM spend (dollars, tokens) and device time: pure functions of the trials, read
by `plan` (how many jobs the next generation may have) and by the stop rules.

Every LLM call counts against `max_candidates`, whatever came back (a verdict, a reply without code, a
duplicate, an LLM error): each is one call the user pays for. The offline generator's proposals count when
evaluated (one it repeats costs nothing and is not evaluated). A generation is planned only after every call
of the last one has settled, so its jobs are bounded by the dollars left divided by what one call may cost
at most; a run never spends more than `budget_usd` unless a call costs more than that bound. Tokens likewise, at
the longest prompt so far plus a full reply (`max_tokens`): a call cannot take more unless its prompt grows. Device
time is bounded by the longest evaluation so far (FIRST_EVAL_S before any), and one such evaluation is kept back for
the final audit: a run stays within `budget_device_s` unless an evaluation runs longer than every one before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kevolve.agent.config import OptimizeConfig, StopConfig
from kevolve.agent.llm.base import price
from kevolve.agent.state import Trial

# A translate prompt on the leaderboard corpus carried 793-1005 tokens (docs/optimize.md, "What a problem
# costs"); before any call is seen, a call is priced at this many prompt tokens (archive examples add some).
FIRST_PROMPT_TOKENS = 4_000
OFFLINE = "offline"  # Candidate.proposer of the offline generator's candidates (offline/proposer.py)
# Before any evaluation is seen, one is priced at this many device-seconds: a small problem's evaluation on the H100
# took 18-55 s cold with its reference and torch.compile set-up (docs/BENCHMARKS.md, 2026-11-27), later ones less.
FIRST_EVAL_S = 60.0


@dataclass(frozen=True)
class NextCost:
    """What the next proposal may cost at most: its LLM call in dollars and tokens, and its evaluation in
    device-seconds (0 where nothing can bind: a local model without a price, the offline generator's tokens)."""

    usd: float = 0.0
    tokens: int = 0
    device_s: float = 0.0


def _next(cost: float | NextCost) -> NextCost:
    return cost if isinstance(cost, NextCost) else NextCost(usd=cost)


def dearest_call(trials: Sequence[Trial], price_call: Callable[[int], float] | None) -> float:
    """What the next LLM call may cost at most: the dearest call so far, or a full reply (max_tokens) after the
    longest prompt seen (FIRST_PROMPT_TOKENS before any) at the model's price (`price_call(prompt_tokens)`),
    whichever is more. 0 for a model without a price that has cost nothing yet (a local model, the offline
    generator): no dollar limit can bind it."""
    longest = max((t.prompt_tokens for t in trials), default=0) or FIRST_PROMPT_TOKENS
    priced = price_call(longest) if price_call is not None else 0.0
    return max([priced, *(t.cost_usd for t in trials)])


def next_call_cost(config: OptimizeConfig, trials: Sequence[Trial]) -> float:
    """What the run's next LLM call may cost at most (dearest_call), at its model's price."""
    llm = config.llm
    if llm is None:
        return dearest_call(trials, None)
    return dearest_call(trials, lambda prompt_tokens: price(llm.prices, llm.model, prompt_tokens, llm.max_tokens))


def next_cost(config: OptimizeConfig, trials: Sequence[Trial]) -> NextCost:
    """The next proposal's most: next_call_cost's dollars, the longest prompt so far (FIRST_PROMPT_TOKENS before
    any) plus a full reply in tokens (0 without an LLM), and the longest evaluation so far in device-seconds."""
    tokens = 0
    if config.llm is not None:
        tokens = (max((t.prompt_tokens for t in trials), default=0) or FIRST_PROMPT_TOKENS) + config.llm.max_tokens
    return NextCost(usd=next_call_cost(config, trials), tokens=tokens, device_s=longest_evaluation(trials))


def tokens_used(trials: Sequence[Trial]) -> int:
    return sum(t.prompt_tokens + t.completion_tokens for t in trials)


def device_used(trials: Sequence[Trial]) -> float:
    """Seconds the evaluations held the device (their wall time, as the parent saw it)."""
    return sum(t.evaluation.wall_s for t in trials if t.evaluation is not None)


def longest_evaluation(trials: Sequence[Trial]) -> float:
    return max((t.evaluation.wall_s for t in trials if t.evaluation is not None), default=0.0) or FIRST_EVAL_S


def counted(trials: Sequence[Trial]) -> int:
    """The proposals that spent `max_candidates`: every LLM call, and every evaluated offline candidate."""
    return sum(1 for t in trials if t.status == "evaluated" or t.candidate is None or t.candidate.proposer != OFFLINE)


def spent(trials: Sequence[Trial]) -> float:
    return sum(t.cost_usd for t in trials)


def proposals_left(trials: Sequence[Trial], cfg: StopConfig, call_cost: float | NextCost) -> int:
    """How many more proposals the limits allow: `max_candidates` less those made, and no more than the dollars
    and the tokens left pay for at `call_cost` each (see dearest_call), nor more evaluations than the device-seconds
    left pay for, one evaluation's worth kept for the final audit."""
    nxt = _next(call_cost)
    left = cfg.max_candidates - counted(trials)
    if cfg.budget_usd is not None and nxt.usd > 0:
        left = min(left, int((cfg.budget_usd - spent(trials)) / nxt.usd + 1e-9))
    if cfg.budget_tokens is not None and nxt.tokens > 0:
        left = min(left, (cfg.budget_tokens - tokens_used(trials)) // nxt.tokens)
    if cfg.budget_device_s is not None and nxt.device_s > 0:
        left = min(left, int((cfg.budget_device_s - device_used(trials)) / nxt.device_s + 1e-9) - 1)
    return max(0, left)


def budget_line(trials: Sequence[Trial], cfg: StopConfig, elapsed_s: float) -> str:
    """'proposals 6/40, $0.0123/$1.00, 120 s/600 s, about 480 s left': each budget the user set, used against its
    limit, and when the first to run out should end the run at the pace so far (issue 37: optimize showed no budget
    used and no time left)."""
    made = counted(trials)
    parts = [f"proposals {made}/{cfg.max_candidates}"]
    if cfg.budget_usd is not None:
        parts.append(f"${spent(trials):.4f}/${cfg.budget_usd:.2f}")
    if cfg.budget_tokens is not None:
        parts.append(f"{tokens_used(trials):,} tokens/{cfg.budget_tokens:,}")
    if cfg.budget_device_s is not None:
        parts.append(f"device {device_used(trials):.0f} s/{cfg.budget_device_s:.0f} s")
    parts.append(f"{elapsed_s:.0f} s" + (f"/{cfg.time_limit_s:.0f} s" if cfg.time_limit_s is not None else ""))
    left = time_left(trials, cfg, elapsed_s)
    if left is not None and left > 0:
        parts.append(f"about {left:.0f} s left")
    return ", ".join(parts)


def time_left(trials: Sequence[Trial], cfg: StopConfig, elapsed_s: float) -> float | None:
    """Seconds until the first budget runs out at the pace so far: proposals and dollars at their rate per
    second of this run, the time limit as it stands; None before the first proposal (no pace yet). A run may
    also end sooner (no improvement for `patience` generations, its generation limit)."""
    made = counted(trials)
    if made <= 0 or elapsed_s <= 0:
        return None
    ends = [elapsed_s / made * (cfg.max_candidates - made)]
    used = spent(trials)
    if cfg.budget_usd is not None and used > 0:
        ends.append(elapsed_s / used * (cfg.budget_usd - used))
    for limit, have in ((cfg.budget_tokens, tokens_used(trials)), (cfg.budget_device_s, device_used(trials))):
        if limit is not None and have > 0:
            ends.append(elapsed_s / have * (limit - have))
    if cfg.time_limit_s is not None:
        ends.append(cfg.time_limit_s - elapsed_s)
    return max(0.0, min(ends))


def budget_reason(trials: Sequence[Trial], cfg: StopConfig, call_cost: float | NextCost) -> str | None:
    """The stop reason when the proposals, the dollars, the tokens or the device-seconds are used up; None while
    another proposal fits."""
    nxt = _next(call_cost)
    if (made := counted(trials)) >= cfg.max_candidates:
        evaluated = sum(1 for t in trials if t.status == "evaluated")
        return f"max_candidates: {made} proposals made ({evaluated} evaluated)"
    if cfg.budget_usd is not None:
        used = spent(trials)
        if used >= cfg.budget_usd:
            return f"budget: spent ${used:.4f} of ${cfg.budget_usd:.4f}"
        if nxt.usd > 0 and used + nxt.usd > cfg.budget_usd:
            return (f"budget: spent ${used:.4f} of ${cfg.budget_usd:.4f}; the next call could cost up to "
                    f"${nxt.usd:.4f}")
    if cfg.budget_tokens is not None:
        took = tokens_used(trials)
        if took + nxt.tokens > cfg.budget_tokens or took >= cfg.budget_tokens:
            return (f"budget_tokens: {took:,} of {cfg.budget_tokens:,} tokens used; the next call could take up to "
                    f"{nxt.tokens:,}")
    if cfg.budget_device_s is not None:
        held = device_used(trials)
        if held + 2 * nxt.device_s > cfg.budget_device_s:
            first = "" if trials else (f" (before any evaluation is measured one is priced at {nxt.device_s:.0f} s: "
                                       f"give --budget-device {2 * nxt.device_s:.0f}s or more)")
            return (f"budget_device_s: evaluations held the device {held:.0f} s of {cfg.budget_device_s:.0f} s; the "
                    f"next could take up to {nxt.device_s:.0f} s, and as much is kept for the final audit{first}")
    return None
