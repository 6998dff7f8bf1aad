"""`kevolve bench --optimize`: the agent writes a solution per problem, then bench audits the set.

For each usable problem, `kevolve optimize`'s loop runs (its own run folder under RUN/agent/, resumed
after a kill) and its best kernel is copied (its own source, candidates/<id>.py) into RUN/generated/levelN/NUM_Name.py, the mirror layout
that solution discovery reads. The bench run then evaluates that folder exactly like any third-party
solution set, with the same baselines and seeds, so `--optimize` and `--solutions` runs compare.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from kevolve.kernelbench.suite import SuiteProblem
from kevolve.sandbox.config import SandboxConfig

log = logging.getLogger(__name__)

# The agent's own evaluations take every sandbox setting of the bench (limits, trials, rules,
# isolation), so that the kernel it keeps was checked the way the bench then checks it: a candidate
# the bench would reject for memory, policy or torch-only must not win inside the agent. Except these:
# the device and cache reach the agent through their own arguments, and the agent draws fresh inputs
# per run (the bench re-evaluates the winner under its own seed).
BENCH_ONLY_FIELDS = frozenset({"device", "cache_dir", "seed"})


def agent_sandbox(bench: SandboxConfig) -> dict[str, object]:
    """The sandbox options for `build_config(sandbox=…)` that carry the bench's settings into the agent."""
    return bench.model_dump(exclude=set(BENCH_ONLY_FIELDS))


def generated_path(root: Path, sp: SuiteProblem) -> Path:
    return root / f"level{sp.level}" / sp.file


def generate_solutions(problems: list[SuiteProblem], run_dir: Path, config: object,
                       say: Callable[[str], None] = print,
                       archive_url: str | None = None) -> tuple[Path, dict[tuple[int, int], str]]:
    """Run the agent on every problem without a generated solution yet (retrieving from and storing into
    the archive at `archive_url` as the agent config says).

    Returns the solutions folder and, per problem the agent found nothing for, why (a reason starting
    'infra_error' when the agent itself failed: that problem stays unfinished and is tried again).
    """
    from kevolve.agent.run import OptimizeError, run_optimize

    out = run_dir / "generated"
    missing: dict[tuple[int, int], str] = {}
    for sp in problems:
        if sp.problem is None or sp.unavailable:
            continue
        target = generated_path(out, sp)
        none_marker, run_marker = target.with_suffix(".none.json"), target.with_suffix(".run")
        if target.exists():
            continue
        if none_marker.exists():
            missing[(sp.level, sp.number)] = json.loads(none_marker.read_text())["reason"]
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        resume = run_marker.read_text().strip() if run_marker.exists() else None
        say(f"optimize {sp.key}{' (resuming ' + resume + ')' if resume else ''}")
        try:
            result = run_optimize(None if resume else sp.problem, config, resume=resume,  # type: ignore[arg-type]
                                  on_start=lambda run, m=run_marker: m.write_text(str(run.path)),
                                  archive_url=archive_url)
        except OptimizeError as e:  # not the problem's verdict: nothing is marked, a rerun tries again
            missing[(sp.level, sp.number)] = f"infra_error: the agent failed: {e}"[:300]
            say(f"optimize {sp.key}: {missing[(sp.level, sp.number)]}")
            continue
        else:
            if result.best_candidate_id is not None:
                # the winner's own file, not best_model.py (whose header would change the content hash):
                # bench then re-evaluates the very candidate the agent archived, which the archive stores once
                tmp = target.with_suffix(".tmp")
                tmp.write_text((result.run_dir / "candidates" / f"{result.best_candidate_id}.py").read_text())
                os.replace(tmp, target)
                say(f"optimize {sp.key}: best {result.speedup or 0:.2f}x after {result.evaluated} evaluations")
                continue
            reason = f"no_solution: the agent found no correct kernel ({result.stop_reason})"[:300]
        none_marker.write_text(json.dumps({"reason": reason}))
        missing[(sp.level, sp.number)] = reason
        say(f"optimize {sp.key}: {reason}")
    return out, missing


__all__ = ["BENCH_ONLY_FIELDS", "agent_sandbox", "generate_solutions", "generated_path"]
