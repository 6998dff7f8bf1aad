"""How `optimize --parts` spreads the run's hard budgets over its parts' loops: pure functions of the whole run's
StopConfig, the parts' shares of eager's time and what the loops before spent.

The budgets are the whole run's (--max-candidates, --budget-usd, --budget-tokens, --budget-device, --time-limit).
Parts run one after another; each loop gets a portion of what is left, in proportion to its share of eager's time
among the funded parts still to run (equal weights where shares were not measured), and at least one candidate's
worth (`floors`) while what is left also pays one for each funded part after it. Where the budget cannot pay one
candidate of every part, the parts with the largest shares are the funded ones. What a loop did not spend is left to
the loops after it, and a loop never spends more than its portion (agent/budget.py), so the parts together stay within
the user's budget. Device time: COMPOSE_RESERVE_S is kept back from the parts for judging and auditing the
composition, and of the time limit COMPOSE_TIME_SHARE (which counts from the run's start, the split included); a
smaller composition (agent/parts_judge.py) is judged only while what is left of both pays for one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from kevolve.agent.budget import FIRST_EVAL_S, FIRST_PROMPT_TOKENS, next_call_cost
from kevolve.agent.config import OptimizeConfig, StopConfig
from kevolve.agent.result import Result

COMPOSE_RESERVE_S = 2 * FIRST_EVAL_S
"""device-seconds kept back from the parts' loops: the composition's evaluation and its audit, before either is
measured (a priced evaluation, as agent/budget.py prices one it has not seen)"""


COMPOSE_TIME_SHARE = 0.2
"""the share of --time-limit kept back from the parts' loops for judging the composition (eager and torch.compile of
the whole model timed beside it: a quarter of a 75 s run on the H200, LeNet-5)"""


@dataclass(frozen=True)
class Spent:
    """What loops spent of the budgets: proposals (each counts against max_candidates), dollars, LLM tokens and
    the evaluations' device-seconds."""

    proposals: int = 0
    usd: float = 0.0
    tokens: int = 0
    device_s: float = 0.0
    call_usd: float = 0.0
    """the dearest a proposal cost on average in one loop: what a model without a price (its first call priced at
    nothing by agent/budget.py) is expected to cost a later loop per call"""

    @classmethod
    def of(cls, r: Result) -> Spent:
        per = r.cost_usd / r.proposals if r.proposals else 0.0
        return cls(r.proposals, r.cost_usd, r.prompt_tokens + r.completion_tokens, r.device_s, per)

    def __add__(self, o: Spent) -> Spent:
        return Spent(self.proposals + o.proposals, self.usd + o.usd, self.tokens + o.tokens, self.device_s + o.device_s,
                     max(self.call_usd, o.call_usd))


def floors(config: OptimizeConfig) -> Spent:
    """One candidate's worth of each budget, as a part's loop prices its first proposal before any is seen
    (agent/budget.py): one proposal, the most its LLM call may cost in dollars and in tokens (0 where no limit can
    bind it), and two evaluations of device time (budget.py keeps one back for an audit)."""
    tokens = FIRST_PROMPT_TOKENS + config.llm.max_tokens if config.llm is not None else 0
    return Spent(1, next_call_cost(config, []), tokens, 2 * FIRST_EVAL_S)


def _limits(stop: StopConfig) -> Spent:
    """The whole run's limits for the parts' loops (inf where unset), the composition's device time kept back."""
    inf = math.inf
    device = inf if stop.budget_device_s is None else stop.budget_device_s - COMPOSE_RESERVE_S
    return Spent(stop.max_candidates, inf if stop.budget_usd is None else stop.budget_usd,
                 inf if stop.budget_tokens is None else stop.budget_tokens, device)  # type: ignore[arg-type]


def funded(weights: Mapping[int, float], stop: StopConfig, floor: Spent) -> tuple[int, ...]:
    """The parts (by index, in the given order) the budget pays at least one candidate for: all of them, or the
    ones with the largest weights where it pays fewer candidates than there are parts."""
    lim = _limits(stop)
    pays = [lim.proposals // floor.proposals]
    for have, unit in ((lim.usd, floor.usd), (lim.tokens, floor.tokens), (lim.device_s, floor.device_s)):
        if unit > 0 and have != math.inf:
            pays.append(max(0, int(have / unit + 1e-9)))
    n = min(pays)
    best = sorted(weights, key=lambda i: -weights[i])[:n]
    return tuple(i for i in weights if i in best)


def _portion(left: float, weight: float, later: Sequence[float], unit: float) -> float:
    """`weight`'s share of `left` among itself and `later`, at least `unit`, leaving `unit` for each later one; where
    `left` pays fewer units than there are parts, one unit if it is among the largest weights that `left` pays, else
    nothing."""
    if left == math.inf:
        return math.inf
    if unit > 0 and (pays := int(left / unit + 1e-9)) < 1 + len(later):
        return unit if sum(w > weight for w in later) < pays else 0.0
    fair = left * weight / (weight + sum(later)) if weight + sum(later) > 0 else left / (1 + len(later))
    keep = unit * len(later)
    return max(0.0, min(max(unit, fair), left - keep))


def part_stop(stop: StopConfig, spent: Spent, weight: float, later: Sequence[float], floor: Spent,
              elapsed_s: float) -> StopConfig | None:
    """The StopConfig of the next part's loop: the whole run's, its budgets cut to the part's portion of what is
    left after `spent` (see the module docstring; `later`: the weights of the funded parts after it) and its time
    limit to its portion of the time left after `elapsed_s`; None where what is left pays no candidate of it."""
    lim = _limits(stop)
    floor = replace(floor, usd=max(floor.usd, spent.call_usd))
    cands = int(_portion(lim.proposals - spent.proposals, weight, later, 1))
    usd = _portion(lim.usd - spent.usd, weight, later, floor.usd)
    tokens = _portion(lim.tokens - spent.tokens, weight, later, floor.tokens)
    device = _portion(lim.device_s - spent.device_s, weight, later, floor.device_s)
    if cands < 1 or (usd < floor.usd) or tokens < max(1, floor.tokens) or device < floor.device_s:
        return None
    update: dict[str, object] = {"max_candidates": cands}
    if stop.budget_usd is not None:
        update["budget_usd"] = usd
    if stop.budget_tokens is not None:
        update["budget_tokens"] = int(tokens)
    if stop.budget_device_s is not None:
        update["budget_device_s"] = device
    if stop.time_limit_s is not None:
        left = stop.time_limit_s * (1 - COMPOSE_TIME_SHARE) - elapsed_s
        if left <= 0:
            return None
        update["time_limit_s"] = _portion(left, weight, later, 0.0)
    return stop.model_copy(update=update)


def weights(shares: Mapping[int, float | None]) -> dict[int, float]:
    """Each part's weight: its share of eager's time, or equal weights where any share is unmeasured."""
    if any(s is None for s in shares.values()):
        return {i: 1.0 for i in shares}
    return {i: float(s) for i, s in shares.items()}  # type: ignore[arg-type]
