"""One `kevolve bench --solutions …` run: open (or resume) the run folder, plan, execute, report."""

from __future__ import annotations

import datetime as dt
import logging
import time
from pathlib import Path

from kevolve.kernelbench.baselines import BaselineCache, device_fingerprint, torch_version
from kevolve.kernelbench.ingest import open_ingestor, row_ingest
from kevolve.kernelbench.runner import make_plan
from kevolve.kernelbench.solutions import discover
from kevolve.kernelbench.store import ResultRow, RunMeta, RunStore
from kevolve.kernelbench.suite import SuiteProblem
from pydantic import Field

from kevolve.records import Record
from kevolve.sandbox.config import SandboxConfig

log = logging.getLogger(__name__)


class BenchArgs(Record):
    """The run's slice of the command line."""

    suite: str
    levels: tuple[int, ...]
    problems: str | None = None
    match: str | None = None
    solutions: str = Field(description="the solution set; with optimize, the folder the agent writes")
    optimize: bool = False
    executor: str = "local"
    address: str | None = None
    devices: tuple[str, ...]
    compile_workers: int = 0
    warm_workers: int = 0
    run_dir: str
    reuse_baselines: bool = True
    retries: int = 2
    seed_given: bool = False
    archive_ingest: str = Field(default="none", description="winners, all or none: what goes into the archive")
    timings: bool = Field(default=False, description="print where the time went (phases over every evaluation)")


def open_run(args: BenchArgs, config: SandboxConfig, fingerprint: str) -> tuple[RunStore, SandboxConfig]:
    """Create the run folder or reopen it; a reopened run keeps its seed unless one was given."""
    store = RunStore(Path(args.run_dir))
    assert config.seed is not None
    meta = store.create_or_open(RunMeta(
        name=Path(args.run_dir).name, suite=str(Path(args.suite).resolve()), levels=args.levels,
        problems=args.problems, match=args.match, solutions=str(Path(args.solutions).resolve()),
        device=config.device, devices=args.devices, device_fingerprint=fingerprint, torch=torch_version(),
        seed=config.seed, executor=args.executor,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds")))
    if not args.seed_given and meta.seed != config.seed:
        config = config.model_copy(update={"seed": meta.seed})
    return store, config


def _executor(args: BenchArgs, config: SandboxConfig, cache: BaselineCache, fingerprint: str,  # noqa: ANN202
              timeline: object | None = None):
    if args.executor == "ray":
        from kevolve.kernelbench.ray_executor import RayExecutor

        return RayExecutor(config, cache.root, args.reuse_baselines, fingerprint, args.address, args.retries)
    from kevolve.kernelbench.runner import LocalExecutor

    return LocalExecutor(list(args.devices), config, cache, args.reuse_baselines, fingerprint,
                         args.compile_workers, args.retries, args.warm_workers, timeline)  # type: ignore[arg-type]


def run_bench(args: BenchArgs, problems: list[SuiteProblem], config: SandboxConfig,
              agent_config: object | None = None, archive_url: str | None = None) -> int:
    """Returns the exit code: 1 while any planned evaluation has no verdict (infra_error, lost); else 0 when some
    problem has a correct kernel faster than eager, 4 when none beat eager, 5 when none was correct.

    With `args.optimize`, the agent (configured by `agent_config`) first writes a solution per problem.
    Each verdict goes to the archive at `archive_url` (None: the default one) as `args.archive_ingest` says.
    """
    from kevolve.kernelbench.console import Progressor, console, print_summary
    from kevolve.kernelbench.metrics import bench_answer
    from kevolve.kernelbench.report import write_reports

    fingerprint = device_fingerprint(args.devices[0])
    store, config = open_run(args, config, fingerprint)
    why_missing: dict[tuple[int, int], str] = {}
    if args.optimize:
        from kevolve.kernelbench.optimize_mode import generate_solutions

        _, why_missing = generate_solutions(problems, store.root, agent_config, console.print, archive_url)
    plan = make_plan(problems, discover(args.solutions), store.finished_keys(), why_missing)
    ingestor = open_ingestor(args.archive_ingest, archive_url)
    ingest = row_ingest(ingestor, problems, plan.jobs, store.root.name) if ingestor else None
    if ingest is not None and plan.skipped:
        for row in store.rows():  # rows finished before a kill may not have reached the archive yet
            ingest(row)
    for row in plan.problem_rows:
        store.write(row)
    infra = sum(row.status == "infra_error" for row in plan.problem_rows)
    cache = BaselineCache(config.cache_dir / "baselines")
    from kevolve.kernelbench.timeline import FILE, Timeline

    timeline = Timeline(store.root / FILE)  # this invocation's: where the time outside evaluations went
    executor = _executor(args, config, cache, fingerprint, timeline)
    t0 = time.monotonic()
    with Progressor(plan.total, plan.skipped, store.root) as progress:
        for row in plan.problem_rows:  # verdicts known without running anything get their line too
            progress.done(row)
        def on_result(row: ResultRow) -> None:
            nonlocal infra
            store.write(row)
            if ingest is not None:
                ingest(row)
            infra += row.status == "infra_error"
            progress.done(row)

        try:
            executor.run(plan.jobs, on_result)
        except KeyboardInterrupt:
            progress.stop()
            print_summary(store, write_reports(store), interrupted=True)
            return 130
    elapsed = time.monotonic() - t0
    print_summary(store, write_reports(store), elapsed=elapsed, evaluated=plan.total)
    if args.timings:
        from kevolve.report import print_phase_summary

        print_phase_summary([r.evaluation for r in store.rows() if r.evaluation is not None])
        from kevolve.kernelbench.timeline import read, summary
        from kevolve.report import print_rows

        print_rows(summary(read(store.root / FILE), timeline.now()), "outside evaluations (timeline.jsonl)")
    lost = getattr(executor, "lost_tasks", 0)
    if infra or lost:
        return 1  # unfinished: rerun the command (infra_error rows are evaluated again)
    answer, line = bench_answer(store.rows())
    console.print(line)
    return answer.exit_code  # 0 improved, 4 nothing faster than eager, 5 nothing correct


__all__ = ["BenchArgs", "open_run", "run_bench"]
