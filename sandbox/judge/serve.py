"""The judge: one trusted process per device that prepares problems and judges candidates.

Entry point `python -m kevolve.sandbox.judge.serve DEVICE` (started by `sandbox/parent/local.py`), answering
framed requests on fds 3 (in) and 4 (out). It imports problem modules but never candidate code;
it holds every draw's inputs and truth, spawns runners (warm spares ahead of need), drives each
call, compares outputs on the device and assembles the verdict. Candidates run only in runners.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch

from kevolve.records import Candidate, Evaluation, Problem
from kevolve.sandbox.common import harness as h
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.isolate.cores import pin_group
from kevolve.sandbox.judge.oracle import ProblemState, prepare
from kevolve.sandbox.judge.residency import release_pinned
from kevolve.sandbox.judge.reference_runner import STARTUP_S, ReferenceRunner, encode_args
from kevolve.sandbox.common.protocol import JudgeReply, ReferenceSummary, RunnerJob
from kevolve.sandbox.judge.runner_proc import RunnerProcess, runner_key, start_local
from kevolve.sandbox.judge import progress
from kevolve.sandbox.judge.facts import Facts
from kevolve.sandbox.judge.flush import Flusher
from kevolve.sandbox.judge.session import Session
from kevolve.sandbox.policy.source import custom_kernel_names

log = logging.getLogger(__name__)
_KEEP_PROBLEMS = 2


class Judge:
    """Problems prepared once, runners spawned ahead, candidates judged one at a time."""

    def __init__(self, device: str, lane_cores: set[int] | None = None, spare_cores: set[int] | None = None,
                 spares: int = 1, keep_scratch: bool = False, scratch_root: Path | None = None) -> None:
        self.keep_scratch = keep_scratch
        self.scratch_root = scratch_root
        self._docker: Any = None
        self.device_str, self.device = device, h.device_of(device)
        self.lane_cores = lane_cores or set(os.sched_getaffinity(0))
        self.spare_cores = spare_cores or set()
        self.threads = 1 if self.device.type == "cpu" else len(self.lane_cores)
        self.spares_wanted = spares
        self.spares: list[tuple[str, RunnerProcess]] = []
        self.problems: OrderedDict[tuple[str, int, int], tuple[ProblemState, ReferenceRunner, ReferenceSummary]] = \
            OrderedDict()
        self.scratch = Path(os.getcwd())
        self.flush = Flusher(self.device)

    # ------------------------------------------------------------------ runners

    @staticmethod
    def _runner_key(config: SandboxConfig) -> str:
        return runner_key(config)

    def _start(self, config: SandboxConfig) -> RunnerProcess:
        from kevolve.sandbox.config import Backend

        if config.backend is Backend.DOCKER:
            from kevolve.sandbox.isolate.container import ContainerRunner, docker_client, sweep_orphans

            if self._docker is None:
                self._docker = docker_client()
                sweep_orphans(self._docker)  # what judges killed earlier left behind
            return ContainerRunner(self._docker, config, self.scratch_root).start()
        return start_local(self.device_str, self.scratch_root, self.spare_cores, config)

    @staticmethod
    def _confine(runner: RunnerProcess, config: SandboxConfig) -> bool:
        """Whether this candidate's runner takes file-system writes away from itself (landlock.py): a
        local runner without a sandbox, where the kernel has Landlock and `confine_writes` asks for it.
        Its builds then go to its own scratch and are promoted into the cache once it is gone, as under
        bubblewrap (cache.promote), rather than straight into the cache, where a candidate could plant
        a module under another's key (red team 2026-11-26: 0.18x -> 194.6x)."""
        from kevolve.sandbox.isolate import landlock

        from kevolve.sandbox.config import Backend

        mode = config.confine_writes
        if mode == "off" or config.backend is Backend.DOCKER \
                or getattr(runner, "launcher", 1) is not None or landlock.abi() <= 0:
            return False  # a container's runner has its own read-only image and volumes
        runner.build_path = str(runner.scratch / "build")
        runner.host_cache = config.cache_dir.resolve()
        return True

    def _check_bytecode(self, facts: Any) -> None:
        """After a candidate whose runner had no sandbox: the primed bytecode every runner reads must be
        as it was primed (pycache.py). Changed, the candidate is rejected, the prefix primed again, and
        the spares started meanwhile (which may have read it) are replaced."""
        from kevolve.sandbox.isolate import pycache
        from kevolve.sandbox.judge.facts import Verdict

        if not pycache.changed():
            return
        facts.stop = Verdict("rejected", "tampering: the candidate wrote the runner bytecode kevolve primed "
                                         "(read by every runner after it)")
        self._drop_spares()

    def _drop_spares(self) -> None:
        spares, self.spares = self.spares, []
        for _k, r in spares:
            r.finish()

    def shutdown(self) -> None:
        """Every runner gone: the problems' (forget) and the spares. Idempotent."""
        self.forget()
        self._drop_spares()

    def _spares_share_lane(self) -> bool:
        """Spare runners start on the cores where candidates are timed (no spare cores of their own)."""
        return not self.spare_cores or bool(self.spare_cores & self.lane_cores)

    def settle_spares(self, limit_s: float = 30.0) -> None:
        """Wait (up to `limit_s` in all) until every spare runner has finished starting: on a machine
        whose spare cores are its lane's, a starting runner's imports share the cores with what is
        being timed."""
        deadline = time.monotonic() + limit_s
        for _k, r in list(self.spares):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if r.alive():
                r.wait_warm(left)

    def prewarm(self, config: SandboxConfig, n: int) -> None:
        """Have `n` spare runners starting now: a new problem needs one for its eager reference and
        one for its first candidate, and their start (torch, the CUDA context, the profiler: ~10 s
        on an H100) then overlaps the problem's preparation instead of following it."""
        key = self._runner_key(config)
        for _k, r in [s for s in self.spares if s[0] != key or not s[1].alive()]:
            r.finish()
        self.spares = [s for s in self.spares if s[0] == key and s[1].alive()]
        while len(self.spares) < n:
            self.spares.append((key, self._start(config)))

    def take_runner(self, config: SandboxConfig, restock: bool = True) -> RunnerProcess:
        """A started runner for `config` (a spare if one is ready); `restock`: start its replacement now."""
        key = self._runner_key(config)
        runner = None
        for i, (k, r) in enumerate(self.spares):
            if k == key and r.alive():
                runner = self.spares.pop(i)[1]
                break
        runner = runner or self._start(config)
        if restock:
            self.prewarm(config, self.spares_wanted)
        if runner.proc is not None:
            pin_group(runner.proc.pid, self.lane_cores)
        return runner

    # ------------------------------------------------------------------ problems

    def _problem(self, problem: Problem, config: SandboxConfig) -> tuple[ProblemState, ReferenceRunner, ReferenceSummary]:
        seed = config.seed if config.seed is not None else self._seed(problem.id)
        key = (problem.id, seed, config.n_draws)
        if key in self.problems:
            self.problems.move_to_end(key)
            return self.problems[key]
        while len(self.problems) >= _KEEP_PROBLEMS:
            self._drop(next(iter(self.problems)))
        t0 = time.monotonic()
        progress.report("reference")
        self.prewarm(config, self.spares_wanted + 1)
        torch.set_num_threads(len(os.sched_getaffinity(0)))  # get_inputs draws on the CPU: use the lane's cores
        try:
            state = prepare(problem, seed, config.n_draws, self.device, self.scratch,
                            memory_limit=int(config.memory_limit_gb * 2**30), make_room=self._make_room)
        finally:
            torch.set_num_threads(1)
        eager = ReferenceRunner(self.take_runner, self.device, self.threads, state, config, "eager")
        try:
            summary = self._baselines(state, eager, config)
        except BaseException:
            eager.close()
            raise
        summary = summary.model_copy(update={"phase_s": {**summary.phase_s, "reference": time.monotonic() - t0}})
        self.problems[key] = (state, eager, summary)
        return self.problems[key]

    def _seed(self, problem_id: str) -> int:
        for (pid, seed, _n) in self.problems:
            if pid == problem_id:
                return seed
        return secrets.randbelow(2**31 - 1000)

    def _baselines(self, state: ProblemState, eager: ReferenceRunner, config: SandboxConfig) -> ReferenceSummary:
        phases = {**state.phase_s, "reference_runner": eager.start_s}
        t0 = time.monotonic()
        eager_t = eager.time(config, self.flush, time.monotonic() + config.timeout_s)
        prof = eager.call(state.pool[0], time.monotonic() + config.timeout_s, op="profile").profile \
            if config.profile else None
        phases["reference_timing"] = time.monotonic() - t0
        compiled, note = None, ""
        if config.want_compile_baseline:
            t0 = time.monotonic()
            try:
                comp = ReferenceRunner(self.take_runner, self.device, self.threads, state, config, "compiled")
                try:
                    compiled = comp.time(config, self.flush, time.monotonic() + 4 * config.timeout_s)
                finally:
                    comp.close()
            except h.StageError as e:
                note = f"torch.compile baseline unavailable: {e.reason}"[:300]
            phases["compile_baseline"] = time.monotonic() - t0
        reports = tuple(d.report for k, d in state.draws.items() if not k.startswith("t")) + tuple(state.unusable)
        return ReferenceSummary(problem_id=state.problem.id, seed=state.seed, device_name=h.device_name(self.device),
                                versions=h.versions(), eager=eager_t, compiled=compiled, compile_note=note,
                                profile=prof, draws=reports, outputs=state.specs, min_bytes=state.min_bytes,
                                flops=state.flops, phase_s=phases, residency=state.residency)

    def _drop(self, key: tuple[str, int, int]) -> None:
        state, eager, summary = self.problems.pop(key)
        host = state.residency == "host"
        eager.close()
        del state, eager, summary  # the last references to its tensors: freed here
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
            if host:
                release_pinned()

    def _make_room(self, need: int) -> None:
        """A problem is about to pin `need` bytes of host memory for its draws: let go of other problems'
        pinned draws, oldest first, while the machine has less than that free (and a quarter more, for
        the float64 pass). Two KernelBench level-1 problems of 6.4 GB tensors hold 64 GiB each (the
        pinned allocator rounds to powers of two): kept side by side, the second one's judge was ended by
        the kernel's out-of-memory killer at 122 GiB on the 125 GiB H100 machine (2026-11-25), two
        problems out of nine in an offline sample."""
        from kevolve.sandbox.isolate.memory import available_bytes

        for key in [k for k, (s, _e, _m) in self.problems.items() if s.residency == "host"]:
            avail = available_bytes()
            if avail is not None and avail >= need * 1.25:
                return
            self._drop(key)

    def forget(self) -> None:
        for key in list(self.problems):
            self._drop(key)

    def reference(self, problem: Problem, config: SandboxConfig) -> ReferenceSummary:
        return self._problem(problem, config)[2]

    # ------------------------------------------------------------------ candidates

    def audit(self, problem: Problem, cand: Candidate, config: SandboxConfig, original: Evaluation) -> Evaluation:
        """Measure an accepted candidate again: fresh runner, fresh inputs, the judge's own clock; a
        disagreement on the runner's timer alone is measured once more before it overturns (audit.confirm)."""
        from kevolve.sandbox.judge import audit

        progress.report("audit")
        first = self._audit_once(problem, cand, config, original)
        if not audit.wants_second(first):
            return first
        progress.report("audit again")
        return audit.confirm(first, self._audit_once(problem, cand, config, original))

    def _audit_once(self, problem: Problem, cand: Candidate, config: SandboxConfig, original: Evaluation) -> Evaluation:
        from kevolve.sandbox.judge import audit
        from kevolve.sandbox.config import CompileBaseline

        t0 = time.monotonic()
        seed = secrets.randbelow(2**31 - 1000)
        cfg = config.model_copy(update={"seed": seed, "compile_baseline": CompileBaseline.OFF, "ncu": False})
        try:
            again, facts = self._evaluate(problem, cand, cfg, audit.CLOCK_CALLS)
        finally:
            key = (problem.id, seed, cfg.n_draws)
            if key in self.problems:
                self._drop(key)
        cand_ms, ref_ms, spread_ms = audit.judge_clock(facts.clock) or (None, None, None)
        return audit.decide(original, again, None if cand_ms is None else ref_ms / cand_ms, again.seeds,
                            time.monotonic() - t0, config.audit_agree, 0.0, cand_ms, spread_ms)

    def evaluate(self, problem: Problem, cand: Candidate, config: SandboxConfig) -> Evaluation:
        return self._evaluate(problem, cand, config)[0]

    def _evaluate(self, problem: Problem, cand: Candidate, config: SandboxConfig,
                  clock_calls: int = 0) -> tuple[Evaluation, Facts]:
        from kevolve.sandbox.judge import verdict

        t0 = time.monotonic()
        state, eager, summary = self._problem(problem, config)
        t_start = time.monotonic()
        # Where spares start on the lane's own cores, the candidate's replacement starts once its timing is
        # done, not beside it: a starting runner's imports there moved timed CPU calls by 2-4 ms, and the wait
        # for it to finish starting (`quiet`) cost 4.6 s of a 26 s `eval` (2 cores, 2026-11-27)
        share = self._spares_share_lane()
        runner = self.take_runner(config, restock=not share)
        gone = runner.wait_warm(STARTUP_S)
        waited = time.monotonic() - t_start
        if gone is not None:
            runner.finish()
            return verdict.infra(problem, cand, summary, f"infra_error: runner failed to start: "
                                 f"{(gone.log_tail.strip().splitlines() or [''])[-1][:200]}", t0), Facts()
        session = Session(state, runner, eager, config, self.device, self.flush, clock_calls,
                          eager_ms=summary.eager.median_ms if summary.eager is not None else None,
                          quiet=self.settle_spares if share else None,
                          timed=(lambda: self.prewarm(config, self.spares_wanted)) if share else None)
        confine = self._confine(runner, config)
        try:
            job = RunnerJob(role="candidate", source=cand.source, init_seed=state.seed,
                            init_args=encode_args(state.init_args), slots=session.slots.encodings(),
                            staging=tuple(s.ref.model_dump() for s in session.staging), outputs=state.specs,
                            staging_sets=tuple(tuple(s.ref.model_dump() for s in st) for st in session.staging_sets[1:]),
                            cache_dir=getattr(runner, "cache_dir_inside", None) or str(config.cache_dir.resolve()),
                            build_dir=runner.build_path, confine_writes=confine,
                            custom_kernel_names=custom_kernel_names(cand.source), threads=self.threads,
                            may_alias_inputs=state.aliases_inputs,
                            gate=session.gate.name if session.gate is not None else None,
                            check_symbols=not {"native", "all"} & set(config.policy_allow))
            runner.watch(config.memory_limit_gb)
            facts = session.run(cand, job.model_dump())
            facts.cpu_s["runner"] = runner.cpu_seconds()
        except h.StageError:  # the reference runner failed: the problem's state cannot be trusted
            self._drop((problem.id, state.seed, config.n_draws))
            raise
        finally:
            t_end = time.monotonic()
            session.close()
            runner.finish(cand.source, keep_scratch=self.keep_scratch)
            session.facts.phase_s["retire"] = time.monotonic() - t_end
            if share:  # a verdict before the timing: its replacement was not started there
                self.prewarm(config, self.spares_wanted)
        if eager is not None and eager.spoiled:  # its channel is out of step: prepared again next time
            self._drop((problem.id, state.seed, config.n_draws))
        if isinstance(runner, RunnerProcess) and runner.launcher is None:  # no sandbox: after it is gone
            self._check_bytecode(facts)
        facts.phase_s["start"] = waited
        return verdict.assemble(problem, cand, config, summary, state, facts, t0), facts


# ---------------------------------------------------------------------- the process


def serve(judge: Judge, ch: Any) -> None:
    from kevolve.sandbox.common.channel import ChannelClosed

    while True:
        try:
            req = ch.recv()
        except ChannelClosed:
            return
        if req is None:
            continue
        op = req.get("op")
        if op == "shutdown":  # runners (containers too) gone before the answer: the parent kills the
            judge.shutdown()   # judge's process group as soon as it has it
            ch.send(JudgeReply(ok=True).model_dump())
            return
        with progress.to(lambda p: ch.send({"progress": p.model_dump()})):
            reply = _answer(judge, op, req)
        ch.send(reply.model_dump())


def _answer(judge: Judge, op: str | None, req: dict[str, Any]) -> JudgeReply:
    try:
        if op == "forget":
            judge.forget()
            return JudgeReply(ok=True)
        problem = Problem.model_validate(req["problem"])
        config = SandboxConfig.model_validate(req["config"])
        if op == "reference":
            return JudgeReply(ok=True, reference=judge.reference(problem, config))
        if op == "evaluate":
            ev = judge.evaluate(problem, Candidate.model_validate(req["candidate"]), config)
            return JudgeReply(ok=True, evaluation=ev.model_dump(mode="json"))
        if op == "audit":
            ev = judge.audit(problem, Candidate.model_validate(req["candidate"]), config,
                             Evaluation.model_validate(req["evaluation"]))
            return JudgeReply(ok=True, evaluation=ev.model_dump(mode="json"))
        return JudgeReply(infra_error=f"unknown request {op!r}")
    except h.StageError as e:
        if e.status == "problem_error":
            return JudgeReply(problem_error=e.reason)
        return JudgeReply(infra_error=f"{e.status}: {e.reason}")
    except Exception as e:  # noqa: BLE001 - kevolve's own bug: reported, and the judge keeps serving
        log.exception("judge failed on %s", op)
        return JudgeReply(infra_error=f"infra_error: judge failed{h.where(e)}: {h.one_line(e)}")


def main(early: list[tuple[str, RunnerProcess]] | None = None) -> None:
    """The judge's process (judge/boot.py calls this once it has started `early`: spare runners, keyed)."""
    from kevolve.sandbox.common.channel import Channel

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="judge %(levelname)s %(message)s")
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    lane = {int(c) for c in sys.argv[2].split(",")} if len(sys.argv) > 2 and sys.argv[2] else None
    spare = {int(c) for c in sys.argv[3].split(",")} if len(sys.argv) > 3 and sys.argv[3] else None
    rfd, wfd = (int(x) for x in sys.argv[4].split(",")) if len(sys.argv) > 4 else (3, 4)
    spares = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else 1
    keep = len(sys.argv) > 6 and sys.argv[6] == "keep"
    root = Path(sys.argv[7]) if len(sys.argv) > 7 and sys.argv[7] else None
    if lane:
        os.sched_setaffinity(0, lane)
    # One thread: the judge's CPU work (comparisons on the CPU device) runs between a runner's
    # calls on the same cores, and OpenMP's spinning threads there made a 64x1024 comparison take
    # 233 ms instead of 1.8 ms on a 2-core machine (see cores.py for the pinned-thread case).
    torch.set_num_threads(1)
    dev = h.device_of(device)
    if dev.type == "cuda":
        torch.empty(1, device=dev)
    judge = Judge(device, lane, spare, spares, keep, root)
    judge.spares = list(early or [])
    import threading

    from kevolve.sandbox.judge.reference import warm_flop_counter

    # torch's FLOP counter costs 1.5 s (CPU) to 7 s (H100 machine) on first use: pay it while idle
    threading.Thread(target=warm_flop_counter, name="warm-flops", daemon=True).start()
    try:
        serve(judge, Channel(rfd, wfd))
    finally:
        judge.shutdown()
    os._exit(0)


if __name__ == "__main__":
    main()
