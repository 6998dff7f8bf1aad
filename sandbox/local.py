"""LocalSandbox: evaluate a candidate in fresh worker processes on this machine.

The reference runs in one worker and the candidate in another (never the same process); the
parent compares their outputs and assembles the Evaluation. A bad candidate is always data.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kevolve.kernelbench.problem import ProblemError
from kevolve.records import Candidate, Evaluation, Outcome, Problem
from kevolve.sandbox import verdict
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.isolation import WorkerExit, WorkerProcess
from kevolve.sandbox.protocol import Draw, WorkerReport, WorkerRequest
from kevolve.sandbox.static_checks import check_candidate_source, custom_kernel_names

log = logging.getLogger(__name__)


def make_draws(base: int, n: int) -> tuple[Draw, ...]:
    ident = [Draw(key=f"d{i}", seed=base + 1 + i) for i in range(n)]
    shifted = [Draw(key=t, seed=base + 101 + i, transform=t)  # type: ignore[arg-type]
               for i, t in enumerate(("negate", "scale", "normal"))]
    return tuple(ident + shifted)


@dataclass
class Reference:
    """A problem's reference data for one seed: outputs, float64 truth, timings."""

    report: WorkerReport
    outputs: dict[str, object]
    draws: tuple[Draw, ...]
    seed: int
    wall_s: float


@dataclass
class LocalSandbox:
    """`Sandbox.evaluate(problem, candidate, config) -> Evaluation` with local worker processes."""

    scratch_root: Path | None = None
    keep_scratch: bool = False
    workers: Callable[[SandboxConfig], WorkerProcess] | None = None  # e.g. a DockerPool's warm containers
    _refs: dict[tuple[str, str, int], Reference] = field(default_factory=dict)

    def evaluate(self, problem: Problem, candidate: Candidate, config: SandboxConfig) -> Evaluation:
        t0 = time.monotonic()
        bad = check_candidate_source(candidate.source)
        if bad:
            return verdict.early(problem, candidate, Outcome.COMPILE_ERROR, f"compile_error: {bad}", t0)
        worker = self._worker(config)  # warms up meanwhile
        try:
            ref = self.reference(problem, config)
            req = WorkerRequest(
                task="candidate", problem_source=problem.source, candidate_source=candidate.source,
                device=config.device, init_seed=ref.seed, draws=ref.draws, outputs=ref.report.outputs,
                trials=config.trials, max_timing_s=config.max_timing_s, warmup=config.warmup,
                profile=config.profile, cache_dir=str(config.cache_dir.resolve()),
                custom_kernel_names=custom_kernel_names(candidate.source))
            done = worker.run(req, config.timeout_s, config.memory_limit_gb)
            outputs = _load_outputs(worker.scratch) if done.report and done.report.status == "done" else {}
        finally:
            worker.kill()
            self._cleanup(worker)
        ev = verdict.assemble(problem, candidate, config, ref, done, outputs, t0)
        if config.ncu and ev.ok:
            if _ncu_would_escape(config):
                log.warning("--ncu skipped: Nsight Compute re-runs the candidate outside the sandbox, "
                            "and this configuration asks for one (--sandbox docker / --isolation bwrap)")
            else:
                from kevolve.sandbox import ncu

                ev = ncu.attach(ev, problem, candidate, config, ref.seed)
        return ev

    def reference(self, problem: Problem, config: SandboxConfig) -> Reference:
        """Reference data for this problem (cached per problem, device and seed)."""
        seed = config.seed if config.seed is not None else secrets.randbelow(2**31 - 1000)
        key = (problem.id, config.device, seed)
        if key in self._refs:
            return self._refs[key]
        draws = make_draws(seed, config.n_draws)
        worker = self._worker(config)
        t0 = time.monotonic()
        try:
            req = WorkerRequest(task="reference", problem_source=problem.source, device=config.device,
                                init_seed=seed, draws=draws, trials=config.trials,
                                max_timing_s=config.max_timing_s, warmup=config.warmup,
                                time_compile=config.want_compile_baseline, profile=config.profile,
                                cache_dir=str(config.cache_dir.resolve()))
            done = worker.run(req, config.timeout_s, config.memory_limit_gb)
            _raise_for_reference(problem, done)
            assert done.report is not None
            ref = Reference(done.report, _load_outputs(worker.scratch), draws, seed, time.monotonic() - t0)
        finally:
            worker.kill()
            self._cleanup(worker)
        if config.seed is not None:
            self._refs[key] = ref
        return ref

    def _worker(self, config: SandboxConfig) -> WorkerProcess:
        """A started worker: from the injected factory, else a local process (under bwrap if asked)."""
        if self.workers is not None:
            return self.workers(config)
        from kevolve.sandbox.bwrap import local_launcher

        return WorkerProcess(config.device, self.scratch_root, launcher=local_launcher(config),
                             scratch_limit_gb=config.scratch_limit_gb).start()

    def _cleanup(self, worker: WorkerProcess) -> None:
        if not self.keep_scratch:
            shutil.rmtree(worker.scratch, ignore_errors=True)


def _ncu_would_escape(config: SandboxConfig) -> bool:
    """ncu runs the candidate once more as a plain host process (it cannot inject through bwrap's
    network namespace or into a container): only where no sandbox was asked for by name."""
    from kevolve.sandbox.config import Backend, Isolation

    return config.backend is Backend.DOCKER or config.isolation is Isolation.BWRAP


def _load_outputs(scratch: Path) -> dict[str, object]:
    import torch

    path = scratch / "outputs.pt"
    if not path.exists():
        return {}
    return torch.load(path, map_location="cpu", weights_only=True)


def _raise_for_reference(problem: Problem, done: WorkerExit) -> None:
    """The reference failing is the problem's (or the machine's) fault: a one-line error."""
    name = Path(problem.path).name
    r = done.report
    if r is not None and r.status == "done":
        return
    if r is not None and r.status == "problem_error":
        raise ProblemError(f"{name}: {r.reason}")
    if done.timed_out:
        raise ProblemError(f"{name}: the reference did not finish within the timeout ({done.phase})")
    if r is not None:
        raise ProblemError(f"{name}: reference failed: {r.reason}")
    code = done.returncode or 0
    how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    last = done.log_tail.strip().splitlines()[-1:] or [""]
    raise ProblemError(f"{name}: reference worker died ({how}) during {done.phase}: {last[0][:200]}")


__all__ = ["LocalSandbox", "make_draws"]
