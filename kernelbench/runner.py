"""Evaluate a solution set over a suite: plan, compile pool, one evaluation lane per device.

The plan turns (suite, solutions, finished work) into problem jobs. The local executor runs one
lane thread per device (`cpu`, or `cuda:N` per `--gpus`), each with its own sandbox, taking whole
problems from a shared queue so that a problem's reference runs once; the build service
(sandbox/build/service.py) compiles every candidate's extensions ahead of it on the remaining CPU cores,
from the plan, without running candidate code. Lanes and the build service are pinned to disjoint
cores, so no evaluation is timed on a core that is compiling.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kevolve.archive.ingest import bench_candidate
from kevolve.kernelbench.baselines import BaselineCache, BenchSandbox
from kevolve.kernelbench.solutions import SolutionFile, names_other
from kevolve.kernelbench.store import MEMORY_LIMIT, NO_SOLUTION, PROBLEM_ERROR, UNAVAILABLE, ResultRow
from kevolve.kernelbench.suite import SuiteProblem
from kevolve.records import Candidate, Evaluation, Outcome, Record
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.isolate.cores import split_cores

if TYPE_CHECKING:
    from kevolve.kernelbench.timeline import Timeline
    from kevolve.sandbox.build.service import BuildResult, BuildService

log = logging.getLogger(__name__)


class CandidateFile(Record):
    """A solution file to evaluate, with its Candidate record built once by the plan (shipped as is to a Ray
    node, carried to the archive)."""

    label: str
    path: str
    candidate: Candidate


class ProblemJob(Record):
    """One problem and the candidates of it still to evaluate."""

    problem: SuiteProblem
    candidates: tuple[CandidateFile, ...]


@dataclass
class Plan:
    jobs: list[ProblemJob]
    problem_rows: list[ResultRow]  # verdicts known without running anything
    skipped: int  # evaluations already finished in an earlier attempt of this run

    @property
    def total(self) -> int:
        return sum(len(j.candidates) for j in self.jobs)


def problem_row(sp: SuiteProblem, status: str, reason: str, worker: str = "", wall_s: float = 0.0) -> ResultRow:
    return ResultRow(level=sp.level, number=sp.number, file=sp.file, problem_id=sp.problem.id if sp.problem else None,
                     status=status, reason=reason, worker=worker, wall_s=wall_s)


def failed_problem_row(sp: SuiteProblem, e: Exception, worker: str, t0: float) -> ResultRow:
    """The row of a problem whose reference could not be prepared: too large for the memory limit
    (memory_limit), broken (problem_error), or the machine's fault (infra_error: retried on rerun)."""
    from kevolve.contract import ProblemTooLarge
    from kevolve.sandbox.parent.local import JudgeLost

    wall = time.monotonic() - t0
    if isinstance(e, ProblemTooLarge):
        why = str(e).partition(": memory_limit: ")[2] or str(e)
        return problem_row(sp, MEMORY_LIMIT, f"memory_limit: {why}", worker, wall)
    if isinstance(e, JudgeLost):
        return problem_row(sp, Outcome.INFRA_ERROR.value, f"infra_error: {e}"[:300], worker, wall)
    return problem_row(sp, PROBLEM_ERROR, f"problem_error: {e}", worker, wall)


def make_plan(problems: list[SuiteProblem], solutions: dict[tuple[int, int], list[SolutionFile]],
              finished: set[tuple[str, str, str]], why_missing: dict[tuple[int, int], str] | None = None) -> Plan:
    jobs, rows, skipped = [], [], 0
    files_of = {lv: [p.file for p in problems if p.level == lv] for lv in {p.level for p in problems}}
    for sp in problems:
        pid = sp.problem.id if sp.problem else f"L{sp.level}/{sp.file}"
        if (pid, "", "") in finished:
            continue
        if sp.problem is None or sp.unavailable:
            status = PROBLEM_ERROR if sp.unavailable.startswith("problem_error") else UNAVAILABLE
            rows.append(problem_row(sp, status, sp.unavailable))
            continue
        files = solutions.get((sp.level, sp.number), [])
        other = [f for f in files if names_other(f, sp.file, files_of[sp.level])]  # by number; named for another one
        files = [f for f in files if f not in other]
        if not files:
            why = (why_missing or {}).get((sp.level, sp.number), "no_solution: the solution set has no candidate for it")
            if other:
                why = (f"no_solution: the solution set's {Path(other[0].path).name} names another problem than "
                       f"{sp.file} (pairing is by level and number: another KernelBench version?)")
            rows.append(problem_row(sp, Outcome.INFRA_ERROR.value if why.startswith("infra_error") else NO_SOLUTION,
                                    why))
            continue
        todo = []
        for f in files:
            try:
                src = Path(f.path).read_text()
            except (OSError, UnicodeDecodeError):
                src = ""  # evaluates to a clear compile_error verdict
            cand = bench_candidate(src, sp.problem.id)
            if (sp.problem.id, f.label, cand.id) in finished:
                skipped += 1
                continue
            todo.append(CandidateFile(label=f.label, path=f.path, candidate=cand))
        if todo:
            jobs.append(ProblemJob(problem=sp, candidates=tuple(todo)))
    return Plan(jobs, rows, skipped)


def evaluate_with_retries(sandbox: BenchSandbox, job: ProblemJob, cand: Candidate, config: SandboxConfig,
                          retries: int) -> tuple[Evaluation, int]:
    """The sandbox's one retry rule (sandbox/parent/make.py) for one of the job's candidates."""
    from kevolve.sandbox.parent.make import evaluate_with_retries as retried

    assert job.problem.problem is not None
    return retried(sandbox, job.problem.problem, cand, config, retries)


def run_problem(job: ProblemJob, sandbox: BenchSandbox, config: SandboxConfig, retries: int, worker: str,
                order: Callable[[tuple[CandidateFile, ...]], Iterable[CandidateFile]] | None = None,
                timeline: Timeline | None = None) -> Iterator[ResultRow]:
    """Evaluate a problem's candidates, yielding each row as it is decided: in the plan's order, or as `order`
    hands them out (the local executor: as their builds finish). `timeline` gets the reference's and each
    evaluation's span."""
    from kevolve.contract import ProblemError
    from kevolve.sandbox.parent.local import JudgeLost

    sp = job.problem
    assert sp.problem is not None
    t0 = time.monotonic()
    span = timeline.begin("reference", lane=worker, problem=sp.key) if timeline else None
    try:
        sandbox.reference(sp.problem, config)  # first, while the compile pool builds its candidates
    except (ProblemError, JudgeLost) as e:
        yield failed_problem_row(sp, e, worker, t0)
        return
    finally:
        if timeline and span:
            timeline.end(span)
    for cf in (order or tuple)(job.candidates):
        cand = cf.candidate
        t0 = time.monotonic()
        span = timeline.begin("evaluation", lane=worker, problem=sp.key, label=cf.label) if timeline else None
        try:
            ev, attempts = evaluate_with_retries(sandbox, job, cand, config, retries)
        except ProblemError as e:
            yield failed_problem_row(sp, e, worker, t0)
            return
        except Exception as e:  # noqa: BLE001 - kevolve's own bug: logged, kept unfinished, run goes on
            log.exception("%s %s: the harness failed", sp.key, cf.label)
            yield ResultRow(level=sp.level, number=sp.number, file=sp.file, problem_id=sp.problem.id,
                            label=cf.label, solution=cf.path, candidate_id=cand.id,
                            status=Outcome.INFRA_ERROR.value, reason=f"harness_error: {type(e).__name__}: {e}"[:300],
                            worker=worker)
            continue
        finally:
            if timeline and span:
                timeline.end(span)
        yield ResultRow.from_evaluation(ev, level=sp.level, number=sp.number, file=sp.file, label=cf.label,
                                        solution=cf.path, attempts=attempts, worker=worker)


class LocalExecutor:
    """Lanes (one per device) plus an optional compile pool, all in this process's threads."""

    def __init__(self, devices: list[str], config: SandboxConfig, cache: BaselineCache | None, reuse: bool,
                 fingerprint: str, compile_workers: int = 0, retries: int = 2, warm_workers: int = 0,
                 timeline: Timeline | None = None) -> None:
        self.devices, self.config, self.cache, self.reuse = devices, config, cache, reuse
        self.fingerprint, self.retries = fingerprint, retries
        self.lane_cores, self.compile_cores = split_cores(len(devices), compile_workers)
        # spares start up on the compile cores: never on a core where something is timed
        self.warm_workers = warm_workers if self.compile_cores else 0
        self.served_warm = 0
        self.builds: dict[str, list[Future[BuildResult]]] = {}
        self.build_seconds = 0.0
        self.timeline = timeline
        self._seen: set[str] = set()  # build keys and precompiled headers already on the timeline
        self._seen_lock = threading.Lock()

    def run(self, jobs: list[ProblemJob], on_result: Callable[[ResultRow], None]) -> None:
        pool = self._start_compile_pool(jobs)
        todo: queue.Queue[ProblemJob] = queue.Queue()
        for j in jobs:
            todo.put(j)
        errors: list[BaseException] = []
        threads = [threading.Thread(target=self._lane, args=(dev, cores, todo, on_result, errors), daemon=True,
                                    name=f"lane-{dev}") for dev, cores in zip(self.devices, self.lane_cores, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if pool is not None:
            pool.close()
        if errors:
            raise errors[0]

    def _start_compile_pool(self, jobs: list[ProblemJob]) -> BuildService | None:
        """The build service on the compile cores, fed the whole plan at once (cached keys return at once)."""
        if not self.compile_cores:
            return None
        from kevolve.sandbox.build.service import WARM_FLAGS, BuildService, gpu_arch
        from kevolve.sandbox.build.recipe import BuildTarget

        cores = self.compile_cores
        arch = gpu_arch(self.devices[0]) if self.config.is_cuda else ""
        workers = max(1, len(cores) // 2)
        # precompiled headers only where a worker is left for the candidates: with one, its two 790 MB headers ran
        # ahead of every candidate's build (a 2-core bench: 225 s cold, 17 s warm, the evaluations 2.4 and 2.8 s)
        service = BuildService(self.config.cache_dir, BuildTarget.current(arch), workers=workers,
                               max_pch=4 if workers > 1 else 0,
                               cores=cores, isolation=self.config.isolation, timeout_s=self.config.timeout_s,
                               pids_limit=self.config.pids_limit, bwrap=self.config.bwrap,
                               confine=self.config.confine_writes != "off")
        # The precompiled headers ahead of the candidates on all workers but one, the rest after them: one worker
        # always starts on the lane's first candidate at once, and with several workers the headers still serve most
        # builds (2 workers, 4 C++ candidates, cold, CPU, one after the other: first built at 52.0 s instead of 143.8 s,
        # all at 171.4 s instead of 177.8 s; docs/BENCHMARKS.md, twenty-eighth session).
        front = WARM_FLAGS[:max(0, workers - 1)]
        for f in service.warm(front):
            f.add_done_callback(lambda f, service=service: self._pch_done(service))
        for j in jobs:
            self._submit(service, j)
        for f in service.warm(WARM_FLAGS[len(front):]) if workers > 1 else []:
            f.add_done_callback(lambda f, service=service: self._pch_done(service))
        if self.timeline is not None:  # builds a kill leaves unfinished show as these less the build spans
            pending = {id(f) for futs in self.builds.values() for f in futs if not f.done()}
            self.timeline.add("builds_submitted", self.timeline.now(), 0.0, n=len(pending))
        return service

    def _submit(self, service: BuildService, job: ProblemJob) -> None:
        for cf in job.candidates:
            if cf.candidate.id not in self.builds:
                self.builds[cf.candidate.id] = futs = service.submit_source(cf.candidate.source)
                for f in futs:
                    f.add_done_callback(self._build_done)

    def _build_done(self, fut: Future[BuildResult]) -> None:
        if self.timeline is None or fut.cancelled() or fut.exception() is not None:
            return
        res = fut.result()
        with self._seen_lock:  # one key's future is shared by every candidate with that extension
            if res.status.value in ("cached", "declined") or res.key in self._seen:
                return
            self._seen.add(res.key)
        end = self.timeline.now()
        self.timeline.add("build_queue", end - res.seconds - res.queued_s, res.queued_s, key=res.key[:12])
        self.timeline.add("build", end - res.seconds, res.seconds, key=res.key[:12], status=res.status.value)

    def _pch_done(self, service: BuildService) -> None:
        if self.timeline is None:
            return
        with self._seen_lock:
            new = [(pid, secs) for pid, secs in list(service.pch_seconds.items()) if pid not in self._seen]
            self._seen.update(pid for pid, _ in new)
        for pid, secs in new:
            self.timeline.add("pch", self.timeline.now() - secs, secs, key=pid[:12])

    def in_build_order(self, cands: tuple[CandidateFile, ...], lane: str) -> Iterator[CandidateFile]:
        """The candidates as their builds finish (plan order among those ready): the lane never waits for one
        candidate's build while another's is done. Waiting, when nothing is ready, is a `build_wait` span."""
        left = list(cands)
        while left:
            ready = [cf for cf in left if all(f.done() for f in self.builds.get(cf.candidate.id, []))]
            if not ready:
                span = self.timeline.begin("build_wait", lane=lane, label=left[0].label) if self.timeline else None
                wait([f for cf in left for f in self.builds.get(cf.candidate.id, []) if not f.done()],
                     return_when=FIRST_COMPLETED)
                if self.timeline and span:
                    self.timeline.end(span)
                continue
            left.remove(ready[0])
            self._account(ready[0].candidate)
            yield ready[0]

    def _account(self, cand: Candidate) -> None:
        """A finished build's seconds counted; a failed one logged (the worker then builds it)."""
        for fut in self.builds.get(cand.id, []):
            if fut.cancelled():
                continue
            res = fut.result()
            self.build_seconds += res.seconds
            if not res.ok:
                log.info("build %s %s: the worker builds it (%s)", res.key[:12], res.status.value,
                         res.log_tail.strip().splitlines()[-1:] or "")

    def _lane(self, device: str, cores: set[int], todo: queue.Queue[ProblemJob],
              on_result: Callable[[ResultRow], None], errors: list[BaseException]) -> None:
        sandbox = None
        try:
            # The lane's judge times on `cores` and starts its spare runners on the compile cores.
            from kevolve.sandbox.parent.make import make_sandbox

            sandbox = make_sandbox(self.config, lane_cores=cores, spare_cores=self.compile_cores or None,
                                   spares=max(1, self.warm_workers), baselines=self.cache, reuse_baselines=self.reuse,
                                   fingerprint=self.fingerprint)
            config = self.config.model_copy(update={"device": device})
            lane = f"local:{device}"
            if self.timeline is not None:
                self.timeline.add("lane_start", 0.0, self.timeline.now(), lane=lane)
            while True:
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                order = lambda cands, lane=lane: self.in_build_order(cands, lane)  # noqa: E731
                for row in run_problem(job, sandbox, config, self.retries, lane, order, self.timeline):
                    on_result(row)
                span = self.timeline.begin("forget", lane=lane, problem=job.problem.key) if self.timeline else None
                sandbox.forget()  # reference outputs of a finished problem can be large
                if self.timeline and span:
                    self.timeline.end(span)  # a host-resident problem's pinned copies freed: seconds on a GPU
        except BaseException as e:  # noqa: BLE001 - surfaced by run() in the main thread
            errors.append(e)
        finally:
            if sandbox is not None:
                sandbox.close()


__all__ = ["CandidateFile", "LocalExecutor", "Plan", "ProblemJob", "make_plan", "run_problem", "split_cores"]
