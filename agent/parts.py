"""`optimize --parts`: a whole model optimized part by part, the winners composed and judged as the whole model.

The model is split into parts (kevolve/parts/decompose.py); each part worth it (at least MIN_SHARE of eager's CPU
time, when measured) gets the ordinary loop (`run_optimize`) on its own problem, so the LLM is prompted per part and
never with the whole model, in a run folder of its own under this run's `parts/`; identical parts are one problem,
optimized once. The best correct candidate of each part that beat its own eager goes into the composition (if no part
did, each part's best correct candidate does, so that the whole still gets a verdict); the composed source
(kevolve/parts/compose.py) is evaluated and audited as a candidate of the whole model, against the whole model's eager
and torch.compile. Every loop shares one sandbox; the budget flags apply to each part's loop.

    runs/<run_id>/  problem.py  problem.json  config.json  parts.json
                    parts/<part run>/ …          each part's own run folder (resumable on its own)
                    candidates/<id>.py, .json    the composition and its verdict
                    best_model.py  report.md  result.json
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable

from kevolve.agent.config import OptimizeConfig
from kevolve.agent.llm.base import LLM
from kevolve.agent.result import PartSummary, Result
from kevolve.agent.rundir import RunFolder
from kevolve.agent.run import UsageError, open_sandbox, run_optimize
from kevolve.records import Answer, Candidate, Evaluation, Origin, Problem, content_hash
from kevolve.sandbox import Sandbox

log = logging.getLogger(__name__)

MIN_SHARE = 0.01
"""a part under this share of eager's CPU time is not worth a loop of its own: it stays PyTorch"""
MEASURE_CALLS = 2
"""forward calls of the whole model on the CPU that measure the parts' shares (after one warm-up)"""


def run_parts(problem: Problem, config: OptimizeConfig, *, llm: LLM | None = None, sandbox: Sandbox | None = None,
              on_start: Callable[[RunFolder], None] | None = None, archive_url: str | None = None) -> Result:
    """Optimize `problem` part by part (see the module docstring) and return the whole model's Result; a model of
    fewer than two parts is optimized whole (`run_optimize`). Raises OptimizeError as run_optimize does."""
    from kevolve.contract import ProblemError
    from kevolve.parts.decompose import decompose

    try:
        dec = decompose(problem, measure=MEASURE_CALLS)
    except ProblemError as e:
        raise UsageError(str(e)) from None
    if len(dec.parts) < 2:
        log.info("%s has %d part(s): optimized whole", problem.name, len(dec.parts))
        return run_optimize(problem, config, llm=llm, sandbox=sandbox, on_start=on_start, archive_url=archive_url)
    if config.sandbox.seed is None:  # one seed for the whole run, as run_optimize gives a run
        config = config.model_copy(update={"sandbox": config.sandbox.model_copy(
            update={"seed": random.SystemRandom().randrange(2**31 - 1000)})})
    run = RunFolder.create(config.runs_dir, problem)
    run.write_text("config.json", config.model_dump_json(indent=1))
    run.write_text("parts.json", dec.model_dump_json(indent=1))
    if on_start is not None:
        on_start(run)
    own = sandbox is None
    sandbox = sandbox if sandbox is not None else open_sandbox(config)
    t0 = time.monotonic()
    try:
        results = _optimize_parts(dec, config, run, llm, sandbox, archive_url)
        return _compose_and_judge(dec, results, config, run, sandbox, time.monotonic() - t0)
    finally:
        if own and getattr(sandbox, "close", None) is not None:
            sandbox.close()  # type: ignore[attr-defined]


def _optimize_parts(dec, config: OptimizeConfig, run: RunFolder, llm: LLM | None, sandbox: Sandbox,  # noqa: ANN001
                    archive_url: str | None) -> dict[int, Result | str]:
    """Each part's loop (its Result), or why it has none."""
    # each part's own winner is not audited: the composition that carries it is, as the whole model
    part_config = config.model_copy(update={"runs_dir": run.path / "parts", "audit": False})
    out: dict[int, Result | str] = {}
    won: dict[str, tuple[int, Result]] = {}  # a family's first part whose loop found a correct candidate
    # the larger parts first: a family's largest member is the one its loop runs on (the others try its winner)
    for part in sorted(dec.parts, key=lambda p: -(p.share or 0.0)):
        if part.share is not None and part.share < MIN_SHARE:
            out[part.index] = f"{100 * part.share:.1f}% of eager's time: not worth a loop"
            continue
        log.info("part %d/%d: %s at %s (%s of eager's CPU time)", part.index, len(dec.parts), part.spelled[:80],
                 ", ".join(part.paths), "—" if part.share is None else f"{100 * part.share:.0f}%")
        kin = won.get(part.family) if part.family else None
        if kin is not None and (tried := _sibling(part, kin, part_config, llm, sandbox)) is not None:
            out[part.index] = tried
            continue
        out[part.index] = r = run_optimize(part.problem, part_config, llm=llm, sandbox=sandbox, archive_url=archive_url)
        if part.family and r.best_candidate_id is not None:
            won.setdefault(part.family, (part.index, r))
    return out


def _sibling(part, kin: tuple[int, Result], config: OptimizeConfig, llm: LLM | None,  # noqa: ANN001
             sandbox: Sandbox) -> Result | None:
    """The best candidate of a part of the same family (the same part but for its sizes) judged on `part`'s own
    problem, in a run of one candidate and no LLM call: the family is optimized once. Its Result where it is correct
    at this part's sizes (faster than this part's eager or not, as the family's loop found it), else None: a kernel
    written for the other sizes alone, and the part gets a loop of its own."""
    index, r = kin
    source = (r.run_dir / "candidates" / f"{r.best_candidate_id}.py").read_text()
    seed = Candidate.from_source(source, part.problem.id, origin=Origin.IMPORTED, proposer=f"part {index}")
    one = config.model_copy(update={"stop": config.stop.model_copy(update={"max_candidates": 1})})
    tried = run_optimize(part.problem, one, llm=llm, sandbox=sandbox, retriever=None, seeds=[seed],
                         seeded_by=f"part {index}")
    ok = tried.best_candidate_id == seed.id
    log.info("part %d: part %d's kernel at its sizes: %s", part.index, index,
             f"correct, {tried.speedup or 0:.2f}x" if ok else "not correct here: a loop of its own")
    return tried if ok else None


def _chosen(results: dict[int, Result | str]) -> dict[int, Result]:
    """The parts whose best correct candidate beat their eager; if none did, every part with a correct one."""
    done = {i: r for i, r in results.items() if isinstance(r, Result) and r.best_candidate_id is not None}
    faster = {i: r for i, r in done.items() if r.answer is Answer.IMPROVED}
    return faster or done


def _compose_and_judge(dec, results: dict[int, Result | str], config: OptimizeConfig, run: RunFolder,  # noqa: ANN001
                       sandbox: Sandbox, elapsed: float) -> Result:
    from kevolve.parts.compose import CompositionError, compose

    chosen = _chosen(results)
    ev, cand, why = None, None, ""
    if chosen:
        sources = {i: (r.run_dir / "candidates" / f"{r.best_candidate_id}.py").read_text() for i, r in chosen.items()}
        try:
            source = compose(dec, sources)
        except CompositionError as e:
            why = f"the parts could not be composed: {e}"
        else:
            cand = Candidate(id=content_hash(source), problem_id=dec.problem.id, source=source, origin=Origin.COMPOSED,
                             proposer="parts", parent_ids=tuple(r.best_candidate_id for r in chosen.values()))
            ev = _judge(dec.problem, cand, config, sandbox)
            run.save_candidate(cand, ev)
    else:
        why = "no part has a correct candidate"
    return _finish(dec, results, chosen, run, cand, ev, why, elapsed)


def _judge(problem: Problem, cand: Candidate, config: OptimizeConfig, sandbox: Sandbox) -> Evaluation:
    """The composition's verdict as the whole model, audited (a fresh runner, fresh inputs) where it is ok."""
    log.info("judging the composition %s as the whole model %s", cand.id, problem.name)
    ev = sandbox.evaluate(problem, cand, config.sandbox)
    audit = getattr(sandbox, "audit", None)
    if config.audit and ev.ok and audit is not None:
        ev = audit(problem, cand, config.sandbox, ev)
    log.info("the composition as the whole model: %s (%s)", ev.outcome.value, ev.reason[:200])
    return ev


def _summaries(dec, results: dict[int, Result | str], chosen: dict[int, Result]) -> tuple[PartSummary, ...]:  # noqa: ANN001
    out = []
    for p in dec.parts:
        r = results.get(p.index, "")
        base = dict(index=p.index, paths=p.paths, spelled=p.spelled, share=p.share)
        if isinstance(r, str):
            out.append(PartSummary(**base, note=r))
            continue
        used = p.index in chosen
        note = "" if used else ("no correct candidate" if r.best_candidate_id is None else
                                "slower than its eager: stays PyTorch")
        if r.best_candidate_id is not None and (by := _proposer(r)).startswith("part "):
            note = f"{by}'s kernel, judged at this part's sizes" + (f"; {note}" if note else "")
        out.append(PartSummary(**base, run_id=r.run_id, answer=r.answer, speedup=r.speedup, note=note,
                               candidate_id=r.best_candidate_id if used else None))
    return tuple(out)


def _proposer(r: Result) -> str:
    """Who wrote a loop's best candidate (its record in the part's run folder)."""
    import json

    try:
        return str(json.loads((r.run_dir / "candidates" / f"{r.best_candidate_id}.json").read_text())
                   ["candidate"]["proposer"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _finish(dec, results: dict[int, Result | str], chosen: dict[int, Result], run: RunFolder,  # noqa: ANN001
            cand: Candidate | None, ev: Evaluation | None, why: str, elapsed: float) -> Result:
    from kevolve.agent.parts_report import render

    loops = [r for r in results.values() if isinstance(r, Result)]
    outcomes = Counter[str]()
    for r in loops:
        outcomes.update(r.outcomes)
    ok = ev is not None and ev.ok
    if ev is not None:
        why = why or f"composition {ev.outcome.value}: {ev.reason}"
    best = run.path / "best_model.py"
    result = Result(
        run_id=run.run_id, run_dir=run.path, problem=dec.problem.name, stop_reason=why or "done",
        best_candidate_id=cand.id if ok and cand else None, answer=Answer.of(ev.speedup if ok and ev else None),
        best_path=best if ok else None, speedup=ev.speedup if ok and ev else None,
        speedup_vs_compile=ev.speedup_vs_compile if ok and ev else None, best_ms=ev.runtime_ms if ev else None,
        eager_ms=ev.eager_ms if ev else None, compile_ms=ev.compile_ms if ev else None,
        proposals=sum(r.proposals for r in loops), evaluated=sum(r.evaluated for r in loops) + (ev is not None),
        outcomes=dict(outcomes), generations=max((r.generations for r in loops), default=0),
        cost_usd=sum(r.cost_usd for r in loops), prompt_tokens=sum(r.prompt_tokens for r in loops),
        completion_tokens=sum(r.completion_tokens for r in loops), cached_replies=sum(r.cached_replies for r in loops),
        elapsed_s=elapsed, parts=_summaries(dec, results, chosen))
    if ok and cand is not None:
        slower = "" if result.answer is Answer.IMPROVED else ": SLOWER than PyTorch eager, keep your module"
        run.write_text("best_model.py", f"# kevolve: {dec.problem.name} composed of its optimized parts "
                       f"({result.speedup or 0:.2f}x vs eager{slower}), run {run.run_id}, candidate {cand.id}\n"
                       + cand.source)
    run.write_text("report.md", render(result, dec, ev))
    run.write_text("result.json", result.model_dump_json(indent=1))
    return result

