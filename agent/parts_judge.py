"""`optimize --parts`, its end: the parts' winners composed into one candidate of the whole model, judged and audited
as the whole model; while a composition is judged not ok, a smaller one, a part fewer, is judged in turn.

The first composition holds every chosen part (each part's best correct candidate that beat its own eager; if none
did, each part's best correct one). Where it is not ok (incorrect, failed, rejected, or not composable), the part with
the least gain, its share of eager's time x (1 - 1/its speedup), is dropped and the rest composed and judged again,
until one is ok or none is left, as long as the device budget left pays for another judgment (the last one's
device time; the first is paid from agent/parts_budget.py's reserve). Every verdict is saved in the run folder
(candidates/<id>.py, .json), and the result says which parts were dropped and why.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter

from kevolve.agent.config import OptimizeConfig
from kevolve.agent.context import Storer
from kevolve.agent.result import CompositionTry, PartSummary, Result
from kevolve.agent.rundir import RunFolder
from kevolve.records import Answer, Candidate, Evaluation, Origin, Problem, content_hash
from kevolve.sandbox import Sandbox

log = logging.getLogger(__name__)


def chosen(results: dict[int, Result | str]) -> dict[int, Result]:
    """The parts whose best correct candidate beat their eager; if none did, every part with a correct one."""
    done = {i: r for i, r in results.items() if isinstance(r, Result) and r.best_candidate_id is not None}
    faster = {i: r for i, r in done.items() if r.answer is Answer.IMPROVED}
    return faster or done


def gain(share: float | None, speedup: float | None) -> float:
    """What a part's candidate takes off the whole model's time, as a share of it: share x (1 - 1/speedup) (an
    unmeasured share counts as 1; a candidate slower than its eager gains less than nothing)."""
    if not speedup:
        return -math.inf
    return (1.0 if share is None else share) * (1.0 - 1.0 / speedup)


def least_gain(parts: dict[int, tuple[float | None, float | None]]) -> int:
    """The part to drop first: the least gain (by `gain` of its (share, speedup)), the later part on a tie."""
    return min(parts, key=lambda i: (gain(*parts[i]), -i))


def _device(ev: Evaluation) -> float:
    return ev.wall_s + (ev.audit.wall_s if ev.audit is not None else 0.0)


def compose_and_judge(dec, results: dict[int, Result | str], config: OptimizeConfig, run: RunFolder,  # noqa: ANN001
                      sandbox: Sandbox, elapsed: float, device_left: float, store: Storer | None = None) -> Result:
    """Compose the chosen parts, judge the composition, drop parts while it is not ok (see the module docstring);
    `device_left`: the device-seconds left for the judgments (inf without --budget-device); `store`: the archive's
    writer, each composition's verdict offered to it as the whole model's kernel (a later `optimize` of the same
    model starts from it: archive.known). Writes the result."""
    from kevolve.parts.compose import CompositionError, compose

    t_in = time.monotonic()
    limit = math.inf if config.stop.time_limit_s is None else config.stop.time_limit_s
    picked = chosen(results)
    shares = {p.index: p.share for p in dec.parts}
    tries: list[CompositionTry] = []
    dropped: dict[int, str] = {}
    ok_ev: Evaluation | None = None
    first_ev: Evaluation | None = None
    ok_cand: Candidate | None = None
    why = "" if picked else "no part has a correct candidate"
    left = dict(picked)
    judged_s = 0.0
    while left:
        try:
            source = compose(dec, {i: (r.run_dir / "candidates" / f"{r.best_candidate_id}.py").read_text()
                                   for i, r in left.items()})
        except CompositionError as e:
            tries.append(CompositionTry(parts=tuple(sorted(left)), outcome="not_composed", reason=str(e)))
            ev = None
        else:
            cand = Candidate(id=content_hash(source), problem_id=dec.problem.id, source=source, origin=Origin.COMPOSED,
                             proposer="parts", parent_ids=tuple(r.best_candidate_id for r in left.values()))
            ev = _judge(dec.problem, cand, config, sandbox)
            run.save_candidate(cand, ev)
            _offer(store, dec.problem, cand, ev, run.run_id)
            device_left -= _device(ev)
            judged_s += _device(ev)
            tries.append(CompositionTry(parts=tuple(sorted(left)), candidate_id=cand.id, outcome=ev.outcome.value,
                                        reason=ev.reason[:300]))
            first_ev = first_ev or ev
            if ev.ok:
                ok_ev, ok_cand = ev, cand
                break
        drop = least_gain({i: (shares[i], r.speedup) for i, r in left.items()})
        last = tries[-1]
        dropped[drop] = (f"the composition of parts {', '.join(map(str, last.parts))} was {last.outcome} "
                         f"({last.reason[:160]}); this part had the least gain "
                         f"({_pct(gain(shares[drop], left[drop].speedup))} of eager's time)")
        del left[drop]
        if left and ev is not None and device_left < _device(ev):
            why = (f"composition {tries[-1].outcome}: {tries[-1].reason}; the device budget left "
                   f"({max(0.0, device_left):.0f} s) pays for no smaller composition")
            break
        time_left = limit - elapsed - (time.monotonic() - t_in)
        if left and ev is not None and time_left < ev.wall_s:
            why = (f"composition {tries[-1].outcome}: {tries[-1].reason}; the time limit left "
                   f"({max(0.0, time_left):.0f} s) pays for no smaller composition")
            break
    if ok_ev is None and not why:
        why = (f"no composition was ok: {tries[0].outcome}: {tries[0].reason}" if len(tries) > 1 else
               f"composition {tries[0].outcome}: {tries[0].reason}" if tries else why)
    return finish(dec, results, picked, dropped, run, ok_cand, ok_ev or first_ev, why,
                  (elapsed + time.monotonic() - t_in, judged_s), tuple(tries))


def _offer(store: Storer | None, problem: Problem, cand: Candidate, ev: Evaluation, run_id: str) -> None:
    """The verdict to the archive, as the loop offers its own (agent/nodes/evaluate.py): a failure is logged."""
    if store is None:
        return
    try:
        store(problem, cand, ev, run_id)
    except Exception as e:  # noqa: BLE001 — the archive is a copy: the run folder already holds the verdict
        log.warning("archive: could not store the composition %s: %s", cand.id, str(e).splitlines()[0][:200] if str(e)
                    else type(e).__name__)


def _pct(v: float) -> str:
    return "—" if v == -math.inf else f"{100 * v:+.1f}%"


def _judge(problem: Problem, cand: Candidate, config: OptimizeConfig, sandbox: Sandbox) -> Evaluation:
    """The composition's verdict as the whole model, audited (a fresh runner, fresh inputs) where it is ok."""
    log.info("judging the composition %s as the whole model %s", cand.id, problem.name)
    ev = sandbox.evaluate(problem, cand, config.sandbox)
    audit = getattr(sandbox, "audit", None)
    if config.audit and ev.ok and audit is not None:
        ev = audit(problem, cand, config.sandbox, ev)
    log.info("the composition as the whole model: %s (%s)", ev.outcome.value, ev.reason[:200])
    return ev


def _summaries(dec, results: dict[int, Result | str], picked: dict[int, Result],  # noqa: ANN001
               dropped: dict[int, str], used: bool) -> tuple[PartSummary, ...]:
    out = []
    for p in dec.parts:
        r = results.get(p.index, "")
        base = dict(index=p.index, paths=p.paths, spelled=p.spelled, share=p.share)
        if isinstance(r, str):
            out.append(PartSummary(**base, note=r))
            continue
        into = p.index in picked and p.index not in dropped and used
        note = "" if into else ("no correct candidate" if r.best_candidate_id is None else
                                "dropped from the composition" if p.index in dropped else
                                "slower than its eager: stays PyTorch" if p.index not in picked else
                                "no composition was ok")
        if r.best_candidate_id is not None and (by := _proposer(r)).startswith("part "):
            note = f"{by}'s kernel, judged at this part's sizes" + (f"; {note}" if note else "")
        out.append(PartSummary(**base, run_id=r.run_id, answer=r.answer, speedup=r.speedup, note=note,
                               candidate_id=r.best_candidate_id if into else None, dropped=dropped.get(p.index, "")))
    return tuple(out)


def _proposer(r: Result) -> str:
    """Who wrote a loop's best candidate (its record in the part's run folder)."""
    import json

    try:
        return str(json.loads((r.run_dir / "candidates" / f"{r.best_candidate_id}.json").read_text())
                   ["candidate"]["proposer"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def finish(dec, results: dict[int, Result | str], picked: dict[int, Result], dropped: dict[int, str],  # noqa: ANN001
           run: RunFolder, cand: Candidate | None, ev: Evaluation | None, why: str, times: tuple[float, float],
           tries: tuple[CompositionTry, ...]) -> Result:
    """The whole run's Result, best_model.py (where a composition was ok), report.md and result.json; `times`:
    the run's wall time and the device time of the compositions judged."""
    elapsed, judged_s = times
    from kevolve.agent.parts_report import render

    loops = [r for r in results.values() if isinstance(r, Result)]
    outcomes = Counter[str]()
    for r in loops:
        outcomes.update(r.outcomes)
    ok = ev is not None and ev.ok and cand is not None
    if ev is not None:
        why = why or f"composition {ev.outcome.value}: {ev.reason}"
    judged = [t for t in tries if t.candidate_id is not None]
    best = run.path / "best_model.py"
    result = Result(
        run_id=run.run_id, run_dir=run.path, problem=dec.problem.name, stop_reason=why or "done",
        best_candidate_id=cand.id if ok and cand else None, answer=Answer.of(ev.speedup if ok and ev else None),
        best_path=best if ok else None, speedup=ev.speedup if ok and ev else None,
        speedup_vs_compile=ev.speedup_vs_compile if ok and ev else None, best_ms=ev.runtime_ms if ev else None,
        eager_ms=ev.eager_ms if ev else None, compile_ms=ev.compile_ms if ev else None,
        proposals=sum(r.proposals for r in loops), evaluated=sum(r.evaluated for r in loops) + len(judged),
        outcomes=dict(outcomes), generations=max((r.generations for r in loops), default=0),
        cost_usd=sum(r.cost_usd for r in loops), prompt_tokens=sum(r.prompt_tokens for r in loops),
        completion_tokens=sum(r.completion_tokens for r in loops), cached_replies=sum(r.cached_replies for r in loops),
        elapsed_s=elapsed, device_s=sum(r.device_s for r in loops) + judged_s,
        parts=_summaries(dec, results, picked, dropped, ok), compositions=tries)
    if ok and cand is not None:
        slower = "" if result.answer is Answer.IMPROVED else ": SLOWER than PyTorch eager, keep your module"
        run.write_text("best_model.py", f"# kevolve: {dec.problem.name} composed of its optimized parts "
                       f"({result.speedup or 0:.2f}x vs eager{slower}), run {run.run_id}, candidate {cand.id}\n"
                       + cand.source)
    run.write_text("report.md", render(result, dec, ev))
    run.write_text("result.json", result.model_dump_json(indent=1))
    return result

