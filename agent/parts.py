"""`optimize --parts`: a whole model optimized part by part, the winners composed and judged as the whole model.

The model is split into parts (kevolve/parts/decompose.py); each part worth it (at least MIN_SHARE of eager's CPU
time, when measured) gets the ordinary loop (`run_optimize`) on its own problem, so the LLM is prompted per part and
never with the whole model, in a run folder of its own under this run's `parts/`; identical parts are one problem,
optimized once. The budget flags are the whole run's: each part's loop gets a portion by its share of eager's time,
what it leaves flowing to the parts after it (agent/parts_budget.py). The parts' winners are composed, judged and
audited as one candidate of the whole model, and smaller compositions while that one is not ok (agent/parts_judge.py).
Every loop shares one sandbox. A run stopped part way is resumed as a whole (`--parts --resume RUN`): the parts whose
loop ended are kept, a part stopped in its loop goes on in its own run folder, the rest start; then the composition
is judged again.

    runs/<run_id>/  problem.py  problem.json  config.json  parts.json
                    part_runs.json               each part's run folder, and whether its loop ended
                    parts/<part run>/ …          each part's own run folder (resumable on its own)
                    candidates/<id>.py, .json    the compositions and their verdicts
                    best_model.py  report.md  result.json
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from pydantic import Field

from kevolve.agent.config import OptimizeConfig
from kevolve.agent.llm.base import LLM
from kevolve.agent.parts_budget import Spent, floors, funded, part_stop, weights
from kevolve.agent.parts_judge import compose_and_judge
from kevolve.agent.parts_report import done_line, plan_table
from kevolve.agent.result import Result
from kevolve.agent.rundir import RunFolder
from kevolve.agent.run import OptimizeError, UsageError, archive_storer, open_sandbox, reopen, run_optimize
from kevolve.archive.ingest import IngestMode
from kevolve.records import Candidate, Origin, Problem, Record
from kevolve.sandbox import Sandbox

if TYPE_CHECKING:
    from kevolve.parts.decompose import Decomposition

log = logging.getLogger(__name__)

MIN_SHARE = 0.01
"""a part under this share of eager's CPU time is not worth a loop of its own: it stays PyTorch"""
MEASURE_CALLS = 2
"""forward calls of the whole model on the CPU that measure the parts' shares (after one warm-up)"""
JOURNAL = "part_runs.json"
R = TypeVar("R", bound=Record)


class PartRun(Record):
    """A part's loop as the whole run's journal (part_runs.json) keeps it."""

    index: int
    run_id: str = Field(description="its run folder under the run's parts/")
    ended: bool = Field(default=False, description="its loop returned (a stop rule, not an interruption or error)")


class PartRuns(Record):
    runs: tuple[PartRun, ...] = ()


def run_parts(problem: Problem | None, config: OptimizeConfig, *, llm: LLM | None = None,
              sandbox: Sandbox | None = None, on_start: Callable[[RunFolder], None] | None = None,
              archive_url: str | None = None, resume: str | None = None, split: Decomposition | None = None) -> Result:
    """Optimize `problem` part by part (see the module docstring) and return the whole model's Result, or go on with
    the --parts run `resume` (an id under config.runs_dir, or a folder); a model of fewer than two parts is optimized
    whole (`run_optimize`). `split`: `problem` already in parts (kevolve.parts.decompose; default: split here, the
    shares measured over MEASURE_CALLS forwards). Raises OptimizeError as run_optimize does, UsageError where
    `resume` is no --parts run."""
    from kevolve.parts.decompose import Decomposition

    t0 = time.monotonic()  # the time limit counts the split (a forward of the model measured on the CPU) too
    if resume is not None:
        run, config = reopen(config, resume)
        if not (run.path / "parts.json").is_file():
            raise UsageError(f"--resume {resume}: run {run.run_id} is not an optimize --parts run: resume it "
                             "without --parts")
        dec = _read(run, "parts.json", Decomposition)
        t0 -= _ended_s(run)  # the time limit is the whole run's: what its ended loops took is spent
    else:
        if problem is None:
            raise UsageError("nothing to optimize: give a module, or --resume RUN_ID")
        dec = split if split is not None else _decompose(problem)
        if len(dec.parts) < 2 or config.offline and _all_bare(dec):
            log.info("%s: %s: optimized whole", problem.name, f"{len(dec.parts)} part(s)" if len(dec.parts) < 2 else
                     "the offline proposer has a candidate for none of its parts (library GEMMs alone)")
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
    try:
        results = _optimize_parts(dec, config, run, llm, sandbox, archive_url, t0)
        spent = sum((Spent.of(r) for r in results.values() if isinstance(r, Result)), Spent())
        device_left = (math.inf if config.stop.budget_device_s is None
                       else config.stop.budget_device_s - spent.device_s)
        store = None if config.ingest is IngestMode.NONE else archive_storer(config.ingest, archive_url)
        return compose_and_judge(dec, results, config, run, sandbox, time.monotonic() - t0, device_left, store)
    finally:
        if own and getattr(sandbox, "close", None) is not None:
            sandbox.close()  # type: ignore[attr-defined]


def _decompose(problem: Problem):  # noqa: ANN202 - a kevolve.parts Decomposition
    from kevolve.contract import ProblemError
    from kevolve.parts.decompose import decompose

    try:
        return decompose(problem, measure=MEASURE_CALLS)
    except ProblemError as e:
        raise UsageError(str(e)) from None


def _read(run: RunFolder, name: str, record: type[R]) -> R:
    """A record of the run folder, as its writer wrote it; UsageError (one line) where it is not."""
    from pydantic import ValidationError

    try:
        return record.model_validate_json((run.path / name).read_text())
    except (OSError, ValidationError) as e:
        raise UsageError(f"run {run.run_id}: {name} cannot be read ({str(e).splitlines()[0][:120]}): "
                         "not a --parts run folder as kevolve wrote it") from None


def _journal(run: RunFolder) -> dict[int, PartRun]:
    if not (run.path / JOURNAL).is_file():
        return {}
    return {p.index: p for p in _read(run, JOURNAL, PartRuns).runs}


def _record(run: RunFolder, journal: dict[int, PartRun], entry: PartRun) -> None:
    journal[entry.index] = entry
    run.write_text(JOURNAL, PartRuns(runs=tuple(journal[i] for i in sorted(journal))).model_dump_json(indent=1))


def _optimize_parts(dec, config: OptimizeConfig, run: RunFolder, llm: LLM | None, sandbox: Sandbox,  # noqa: ANN001
                    archive_url: str | None, t0: float) -> dict[int, Result | str]:
    """Each part's loop (its Result), or why it has none: a part whose loop ended (part_runs.json) is read back, one
    stopped in its loop goes on, the others start, each within its portion of the budgets left."""
    # each part's own winner is not audited: the composition that carries it is, as the whole model
    part_config = config.model_copy(update={"runs_dir": run.path / "parts", "audit": False})
    journal = _journal(run)
    worth = {p.index: p.share for p in dec.parts if p.share is None or p.share >= MIN_SHARE}
    # parts the offline proposer has no candidate for take no share of the budgets
    bare = {i: why for i in worth if config.offline and i not in journal
            and (why := _nothing_to_fuse(next(p for p in dec.parts if p.index == i).problem))}
    worth = {i: s for i, s in worth.items() if i not in bare}
    weight = weights(worth)
    floor = floors(config)
    paid = funded(weight, config.stop, floor)
    out: dict[int, Result | str] = {}
    spent = Spent()
    won: dict[str, tuple[int, Result]] = {}  # a family's first part whose loop found a correct candidate
    # the larger parts first: they have the first use of the budget, and a family's largest member is the one its
    # loop runs on (the others try its winner)
    order = [p.index for p in sorted(dec.parts, key=lambda p: -(p.share or 0.0))]
    log.info("%s", plan_table(dec))
    for part in sorted(dec.parts, key=lambda p: order.index(p.index)):
        entry = journal.get(part.index)
        later = [weight[i] for i in order[order.index(part.index) + 1:] if i in paid]
        if entry is not None and entry.ended:
            out[part.index] = _ended(run, entry)
        elif part.index in bare:
            out[part.index] = bare[part.index]
        elif part.index not in worth:
            out[part.index] = f"{100 * (part.share or 0):.1f}% of eager's time: not worth a loop"
        elif entry is None and part.index not in paid:
            out[part.index] = (f"the run's budget pays a candidate for {len(paid)} of the {len(worth)} parts: "
                               "those with the largest shares")
        else:
            kin = won.get(part.family) if part.family and entry is None else None
            out[part.index] = _loop(part, entry, kin, part_config, run, journal, llm, sandbox, archive_url,
                                    (spent, later, weight[part.index], floor, time.monotonic() - t0))
        r = out[part.index]
        log.info("%s", done_line(part, r))
        if isinstance(r, Result):
            spent = spent + Spent.of(r)
            if part.family and r.best_candidate_id is not None:
                won.setdefault(part.family, (part.index, r))
    return out


def _all_bare(dec) -> bool:  # noqa: ANN001 - a kevolve.parts Decomposition
    """No part worth a loop has a candidate from the offline proposer (an MLP: each Linear alone is the library's
    GEMM, while the whole model fuses each activation into the GEMM before it)."""
    return all(p.share is not None and p.share < MIN_SHARE or _nothing_to_fuse(p.problem) for p in dec.parts)


def _nothing_to_fuse(problem: Problem) -> str:
    """Why the offline proposer has no candidate for a part (a Linear alone: the library's GEMM), or ''. Traced once
    per problem (run_parts asks before the split's budgets are spread, _optimize_parts again)."""
    from kevolve.offline.generate import plan
    from kevolve.offline.graph.trace import TraceError

    if problem.id not in _BARE:
        try:
            plan(problem)
            _BARE[problem.id] = ""
        except TraceError as e:
            _BARE[problem.id] = f"no candidate from the offline proposer ({str(e).split(';')[0][:120]})"
    return _BARE[problem.id]


_BARE: dict[str, str] = {}  # problem id -> _nothing_to_fuse's answer (a problem's id is its content's hash)


def _ended_s(run: RunFolder) -> float:
    """The seconds the run's ended part loops took (their results' elapsed_s)."""
    return sum(_read(run, f"parts/{e.run_id}/result.json", Result).elapsed_s
               for e in _journal(run).values() if e.ended)


def _ended(run: RunFolder, entry: PartRun) -> Result:
    path = run.path / "parts" / entry.run_id
    log.info("part %d: its loop ended (run %s): kept", entry.index, entry.run_id)
    return _read(run, f"parts/{entry.run_id}/result.json", Result).model_copy(update={"run_dir": path})


def _sibling(part, kin: tuple[int, Result], config: OptimizeConfig, llm: LLM | None,  # noqa: ANN001
             sandbox: Sandbox, on_start: Callable[[RunFolder], None]) -> tuple[Result, bool]:
    """The best candidate of a part of the same family (the same part but for its sizes) judged on `part`'s own
    problem, in a run of one candidate and no LLM call: the family is optimized once. Its Result, and whether it is
    correct at this part's sizes (faster than this part's eager or not, as the family's loop found it); where it is
    not (a kernel written for the other sizes alone), the part gets a loop of its own."""
    index, r = kin
    source = (r.run_dir / "candidates" / f"{r.best_candidate_id}.py").read_text()
    seed = Candidate.from_source(source, part.problem.id, origin=Origin.IMPORTED, proposer=f"part {index}")
    one = config.model_copy(update={"stop": config.stop.model_copy(update={"max_candidates": 1})})
    tried = run_optimize(part.problem, one, llm=llm, sandbox=sandbox, retriever=None, seeds=[seed],
                         seeded_by=f"part {index}", on_start=on_start)
    ok = tried.best_candidate_id == seed.id
    log.info("part %d: part %d's kernel at its sizes: %s", part.index, index,
             f"correct, {tried.speedup or 0:.2f}x" if ok else "not correct here: a loop of its own")
    return tried, ok


def _loop(part, entry: PartRun | None, kin: tuple[int, Result] | None, part_config: OptimizeConfig,  # noqa: ANN001
          run: RunFolder, journal: dict[int, PartRun], llm: LLM | None, sandbox: Sandbox, archive_url: str | None,
          plan: tuple) -> Result | str:
    """One part's loop: started within its portion of the budgets left (first its family's winner, `kin`, tried at
    its sizes), or gone on with in its own folder (whose saved config holds the portion it was given)."""
    spent, later, weight, floor, elapsed = plan
    how = "—" if part.share is None else f"{100 * part.share:.0f}%"

    def started(folder: RunFolder) -> None:
        _record(run, journal, PartRun(index=part.index, run_id=folder.run_id))

    try:
        if entry is not None:
            log.info("part %d: going on with its loop (run %s)", part.index, entry.run_id)
            r = run_optimize(None, part_config, llm=llm, sandbox=sandbox, archive_url=archive_url,
                             resume=str(run.path / "parts" / entry.run_id))
        else:
            stop = part_stop(part_config.stop, spent, weight, later, floor, elapsed)
            if stop is None:
                return "the run's budget was spent by the parts before it"
            own = part_config.model_copy(update={"stop": stop})
            if kin is not None:
                tried, ok = _sibling(part, kin, own, llm, sandbox, started)
                if ok:
                    _record(run, journal, PartRun(index=part.index, run_id=tried.run_id, ended=True))
                    return tried
                spent = spent + Spent.of(tried)  # what the try held of the device comes off this part's portion
                stop = part_stop(part_config.stop, spent, weight, later, floor, elapsed)
                if stop is None:
                    return f"part {kin[0]}'s kernel is not correct here, and the run's budget was spent"
                own = part_config.model_copy(update={"stop": stop})
            log.info("part %d: %s at %s (%s of eager's CPU time), %d candidates at most", part.index,
                     part.spelled[:80], ", ".join(part.paths), how, stop.max_candidates)
            r = run_optimize(part.problem, own, llm=llm, sandbox=sandbox, archive_url=archive_url, on_start=started)
    except OptimizeError as e:
        raise type(e)(f"part {part.index}: {e} (the whole run goes on with --parts --resume {run.run_id})") from None
    _record(run, journal, PartRun(index=part.index, run_id=r.run_id, ended=True))
    return r
