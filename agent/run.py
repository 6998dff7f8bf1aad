"""Start or resume one optimize run: the run folder, the SQLite checkpointer, the graph, the result.

Entry points (the CLI, `kevolve.optimize`) build the config and call `run_optimize`; nothing here
reads the environment.
"""

from __future__ import annotations

import functools
import logging
import queue
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Literal

from kevolve.agent.config import OptimizeConfig
from kevolve.agent.context import Context, Retriever, Storer
from kevolve.agent.evolution import NoveltyIndex
from kevolve.agent.llm.base import LLM, NonRetryableLLMError
from kevolve.agent.prompting import PromptError, Prompts
from kevolve.agent.result import Result
from kevolve.agent.rundir import RunFolder
from kevolve.agent.stopping import HeldSignal, holding_saver
from kevolve.archive.ingest import IngestMode
from kevolve.records import Candidate, Problem
from kevolve.sandbox import Sandbox
from kevolve.sandbox.build.service import Prebuilder

log = logging.getLogger(__name__)

# Types the checkpoint may deserialize (LangGraph refuses unregistered ones).
_CHECKPOINT_TYPES = [("kevolve.records", n) for n in ("Problem", "Candidate", "OfflineChoice", "Evaluation",
                                                      "TimingStats", "CheckResult", "KernelLaunch", "Profile",
                                                      "Outcome", "Origin")]
_CHECKPOINT_TYPES += [("kevolve.agent.state", n) for n in ("Job", "Trial", "Example")]


class OptimizeError(RuntimeError):
    """The run cannot start or had to stop; the message is one line for the user."""


class UsageError(OptimizeError):
    """What the user asked for is unusable (no such run, a broken problem): their input, not the run."""


def archive_retriever(db_url: str | None = None) -> Retriever | None:
    """`kevolve.archive.retrieve` on the archive at `db_url` (default: the default archive)."""
    try:
        from kevolve.archive import retrieve
    except Exception:  # noqa: BLE001 — a missing or broken archive must not stop optimization
        return None
    return functools.partial(retrieve, db_url=db_url)


def archive_storer(mode: IngestMode, db_url: str | None = None) -> Storer | None:
    """An `Ingestor` writing each evaluated candidate (or each winner) to the archive at `db_url` as its
    verdict returns. None when ingest is off or the archive's packages are missing (a partial install:
    logged); raises UsageError when the database cannot be opened."""
    if mode is IngestMode.NONE:
        return None
    try:
        from kevolve.archive import open_archive
        from kevolve.archive.db import ArchiveError
        from kevolve.archive.ingest import Ingestor
    except ImportError as e:  # a partial install: the run goes on, its folder keeps every verdict
        from kevolve.extras import install_hint

        log.warning("archive ingest skipped: %s", install_hint(e.name or ""))
        return None
    try:
        archive = open_archive(db_url)
    except ImportError as e:
        from kevolve.extras import install_hint

        log.warning("archive ingest skipped: %s", install_hint(e.name or ""))
        return None
    except ArchiveError as e:
        raise UsageError(f"{e} (or --archive-ingest none)") from None
    return Ingestor(archive, mode, run_kind="optimize")


def _prompts(config: OptimizeConfig) -> Prompts:
    try:
        return Prompts(config.prompts_dir)
    except PromptError as e:
        raise UsageError(str(e)) from None


def _archive_hooks(config: OptimizeConfig, retriever: Retriever | None | Literal["archive"],
                   storer: Storer | None | Literal["archive"], url: str | None) -> tuple[Retriever | None, Storer | None]:
    """What the run retrieves from and stores into ("archive": the archive at `url`), as the config allows."""
    if not config.archive:
        retriever = None
    elif retriever == "archive":
        retriever = archive_retriever(url)
    if config.ingest is IngestMode.NONE:
        storer = None
    elif storer == "archive":
        storer = archive_storer(config.ingest, url)
    return retriever, storer


def _archive_seeded(proposer: object, problem: Problem, config: OptimizeConfig, url: str | None) -> object:
    """`proposer`, starting with the archive's own kernels of this very problem where it holds some (archive.known)."""
    from kevolve.agent.proposer import ArchiveSeeded

    try:
        from kevolve.archive import known
    except ImportError:  # a partial install: the archive's packages are missing (archive_storer says so)
        return proposer
    kernels = known(problem.id, config.sandbox.is_cuda, k=config.archive_reuse, db_url=url)
    if kernels:
        log.info("the archive holds %d kernel(s) of this very problem: evaluated first", len(kernels))
    return ArchiveSeeded(proposer, kernels) if kernels else proposer  # type: ignore[arg-type]


def open_sandbox(config: OptimizeConfig) -> Sandbox:
    """The backend config.sandbox names (local or docker), whichever entry point started the run."""
    from kevolve.sandbox.isolate.bwrap import IsolationUnavailable
    from kevolve.sandbox.isolate.container import DockerUnavailable
    from kevolve.sandbox.parent.make import make_sandbox

    try:
        return make_sandbox(config.sandbox)
    except (DockerUnavailable, IsolationUnavailable) as e:
        raise UsageError(f"sandbox {config.sandbox.backend.value}: {str(e).splitlines()[0]}") from None


def _checkpointer(run: RunFolder, held: HeldSignal | None = None):  # noqa: ANN202
    """LangGraph's SQLite checkpointer on the run's database; with `held`, one that delivers a held Ctrl-C or
    SIGTERM once a step's checkpoint is written (agent/stopping.py)."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(run.checkpoint_db, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    saver_cls = SqliteSaver if held is None else holding_saver(SqliteSaver, held)
    return saver_cls(conn, serde=JsonPlusSerializer(allowed_msgpack_modules=_CHECKPOINT_TYPES)), conn


def _open(problem: Problem | None, config: OptimizeConfig, resume: str | None) -> tuple[RunFolder, OptimizeConfig]:
    if resume is None:
        if problem is None:
            raise UsageError("nothing to optimize: give a module, or --resume RUN_ID")
        if config.sandbox.seed is None:  # one seed per run: the reference is computed once and reused
            config = config.model_copy(update={"sandbox": config.sandbox.model_copy(
                update={"seed": random.SystemRandom().randrange(2**31 - 1000)})})
        run = RunFolder.create(config.runs_dir, problem)
        run.write_text("config.json", config.model_dump_json(indent=1))
        return run, config
    run, saved = reopen(config, resume)
    if (run.path / "parts.json").is_file():
        raise UsageError(f"--resume {resume}: run {run.run_id} is an optimize --parts run: resume it with --parts")
    return run, saved


def reopen(config: OptimizeConfig, resume: str) -> tuple[RunFolder, OptimizeConfig]:
    """The run folder `resume` names (an id under config.runs_dir, or a path) and the config it was started with,
    with the caller's API key; UsageError where there is none."""
    run = RunFolder.find(config.runs_dir, resume)
    if run is None:
        raise UsageError(f"--resume {resume}: no such run (looked in {config.runs_dir}/ and at that path)")
    saved = OptimizeConfig.model_validate_json((run.path / "config.json").read_text())
    # The saved config wins (same seed, limits, device); the key is the caller's (never on disk).
    if saved.llm is not None and config.llm is not None:
        saved = saved.model_copy(update={"llm": saved.llm.model_copy(update={"api_key": config.llm.api_key})})
    return run, saved


def run_optimize(problem: Problem | None, config: OptimizeConfig, *, llm: LLM | None = None,
                 sandbox: Sandbox | None = None, resume: str | None = None,
                 retriever: Retriever | None | Literal["archive"] = "archive",
                 storer: Storer | None | Literal["archive"] = "archive",
                 on_start: Callable[[RunFolder], None] | None = None, archive_url: str | None = None,
                 prebuild: Prebuilder | None = None, seeds: Sequence[Candidate] = (), seeded_by: str = "") -> Result:
    """Run (or continue) the loop to a stop rule and return the result; raises OptimizeError.

    The proposer is built here from the config (agent/proposer.py: offline, LLM, or LLM seeded with
    offline translations); `llm` replaces the configured LLM (a test's scripted one, an API caller's).

    `prebuild` (e.g. a sandbox.builds.BuildService on spare cores) is handed each proposal's source
    the moment it is accepted, so its extensions compile while other candidates are evaluated.

    `retriever` / `storer` "archive" mean the archive at `archive_url` (the entry point resolves it;
    None = the default archive), used as `config.archive` / `config.ingest` say.

    `seeds`: candidates (of this problem or one like it) that answer generation 0's first translate jobs, judged
    like any other; `seeded_by` is what their records name as proposer (agent/parts.py: a sibling part's winner).
    """
    from kevolve.agent.proposer import make_proposer

    prompts = _prompts(config)  # before the run folder exists: a bad --prompts DIR leaves nothing behind
    run, config = _open(problem, config, resume)
    if on_start is not None:
        on_start(run)
    try:
        proposer = make_proposer(problem or run.problem(), config, llm)
        if seeds:
            from kevolve.agent.proposer import ArchiveSeeded

            proposer = ArchiveSeeded(proposer, seeds, by=seeded_by or "seed")
    except NonRetryableLLMError as e:
        raise OptimizeError(str(e)) from None
    if resume is not None:
        prompts = _prompts(config)  # the saved config's folder
    own = sandbox is None  # a sandbox made here is closed here: its judge and spare runners hold device memory
    sandbox = sandbox if sandbox is not None else open_sandbox(config)
    try:
        return _drive(problem, config, run, proposer, sandbox, retriever, storer, archive_url, prebuild, prompts)
    finally:
        if own:
            close = getattr(sandbox, "close", None)
            if close is not None:
                t0 = time.monotonic()
                close()
                if time.monotonic() - t0 > 5.0:
                    log.warning("closing run %s's sandbox took %.0f s", run.run_id, time.monotonic() - t0)


def _lanes(config: OptimizeConfig) -> queue.Queue[str]:
    """A pool of the devices evaluations run on, one entry per evaluation allowed at once."""
    pool: queue.Queue[str] = queue.Queue()
    for dev in config.lanes():
        pool.put(dev)
    return pool


def _drive(problem: Problem | None, config: OptimizeConfig, run: RunFolder, proposer: object, sandbox: Sandbox,
           retriever: Retriever | None | Literal["archive"], storer: Storer | None | Literal["archive"],
           archive_url: str | None, prebuild: Prebuilder | None, prompts: object) -> Result:
    """The graph to its stop rule, the audit, the result files (run_optimize's body, its sandbox ready)."""
    from kevolve.agent.graph import build_graph
    from kevolve.agent.report import write_results
    from kevolve.contract import ProblemError

    if config.archive and config.archive_reuse and retriever == "archive":
        proposer = _archive_seeded(proposer, problem or run.problem(), config, archive_url)
    retriever, storer = _archive_hooks(config, retriever, storer, archive_url)
    ctx = Context(proposer=proposer, sandbox=sandbox, config=config, run=run,
                  novelty=NoveltyIndex(config.evolution.novelty_threshold), retrieve=retriever, store=storer,
                  eval_slots=threading.Semaphore(len(config.lanes())), lanes=_lanes(config), prebuild=prebuild,
                  prompts=prompts)
    held = HeldSignal()
    saver, conn = _checkpointer(run, held)
    app = build_graph().compile(checkpointer=saver)
    thread = {"configurable": {"thread_id": run.run_id}, "max_concurrency": config.evolution.concurrency,
              "recursion_limit": 20 + 6 * config.stop.max_generations}
    try:
        snapshot = app.get_state(thread)
        started = bool(snapshot.values)
        if started:
            ctx.novelty.sync(snapshot.values.get("trials", []))
            log.info("resuming run %s at %s", run.run_id, _resume_point(snapshot))
        if started and _ended(snapshot):
            state = snapshot.values
        else:
            check_feasible(problem or run.problem(), sandbox, config)
            ctx.session_started = time.time()  # search time starts now, as generation 0's does after plan
            with held.installed():  # Ctrl-C / SIGTERM stop the run between steps, every finished task's write kept
                state = app.invoke(None if started else {"problem": problem or run.problem(), "generation": 0},
                                   thread, context=ctx, durability="sync")
    except NonRetryableLLMError as e:
        values = app.get_state(thread).values
        if values.get("problem") is not None:
            write_results(run, values, f"llm_error: {e}")
        raise OptimizeError(f"{e} — the run stopped; fix it and continue with --resume {run.run_id}") from None
    except ProblemError as e:
        raise UsageError(str(e)) from None
    finally:
        conn.close()
    if config.audit:
        state = audit_best(state, sandbox, config, store=storer, run_id=run.run_id)
    return write_results(run, state, state.get("stop_reason") or "done")


def check_feasible(problem: Problem, sandbox: Sandbox, config: OptimizeConfig) -> None:
    """Prepare the problem in the judge before the first LLM call, as `kevolve eval` does before its verdict
    (sandbox.reference: the draws, truth and baselines the first evaluation would prepare, kept for it): a
    problem whose data cannot fit, or that is broken, raises ProblemError here, before any call is paid for.
    A sandbox without `reference` (a test fake) is left be; a judge that fails to start is left to the
    evaluations, which retry it and report infra_error."""
    from kevolve.sandbox.parent.local import JudgeLost

    reference = getattr(sandbox, "reference", None)
    if reference is None:
        return
    t0 = time.monotonic()
    try:
        reference(problem, config.sandbox)
    except JudgeLost as e:
        log.warning("could not prepare %s before the first proposal: %s", problem.name, str(e).splitlines()[0][:200])
        return
    log.info("prepared %s in the judge in %.1f s", problem.name, time.monotonic() - t0)


def _ended(snapshot) -> bool:  # noqa: ANN001 - a LangGraph StateSnapshot
    """Did the graph reach its end? Not merely "nothing next": after Ctrl-C, LangGraph lets the step's tasks in
    flight finish and keeps their writes, but never commits the step; `get_state` then applies those writes and
    reports no next node, while the step's tasks are still listed. Only a finished graph has neither."""
    return not snapshot.next and not snapshot.tasks


def _resume_point(snapshot) -> str:  # noqa: ANN001 - a LangGraph StateSnapshot
    """Where a resumed run goes on: 'its end', or the step's nodes, each once with its count ('evaluate x4')."""
    if _ended(snapshot):
        return "its end"
    names = snapshot.next or tuple(t.name for t in snapshot.tasks)
    counted = ", ".join(n if names.count(n) == 1 else f"{n} x{names.count(n)}" for n in dict.fromkeys(names))
    return counted + ("" if snapshot.next else " (finished before the interruption; committed now)")


def audit_best(state: dict, sandbox: Sandbox, config: OptimizeConfig, tries: int = 3, store: Storer | None = None,
               run_id: str = "") -> dict:
    """The run's winner, measured again in a fresh process with a second timer (sandbox.audit).

    A winner the audit overturns keeps its trial, now `rejected: audit_mismatch`, and the next
    fastest is audited in turn; so is the next fastest when the audit's lower speed puts the winner
    below it (at most `tries` audits). Each audited verdict goes to `store` (the archive), where it
    binds the kernel's best (archive/store.py). A sandbox without `audit` (a test fake) is left be.
    """
    from kevolve.agent.evolution import best_candidate

    audit = getattr(sandbox, "audit", None)
    trials = list(state.get("trials", []))
    problem = state.get("problem")
    if audit is None or problem is None:
        return state
    for _ in range(tries):
        best = best_candidate(trials)
        if best is None or best.candidate is None or best.evaluation is None or best.evaluation.audit is not None:
            break
        log.info("auditing the winner %s (%.2fx): measured again in a fresh process on fresh inputs",
                 best.candidate.id, best.speedup or 0.0)
        ev = audit(problem, best.candidate, config.sandbox, best.evaluation)
        trials = [t.model_copy(update={"evaluation": ev}) if t is best else t for t in trials]
        if store is not None:
            store(problem, best.candidate, ev, run_id)
        log.info("audit of %s: %s", best.candidate.id, ev.audit.summary if ev.audit else ev.reason)
    return {**state, "trials": trials}
