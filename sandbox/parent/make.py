"""One way to build the sandbox a run evaluates with, and one rule for the machine's failures.

Every entry point (`kevolve eval`, `optimize`, the Python API, `bench` lanes, Ray tasks) builds its
sandbox here and retries infrastructure failures here, so they cannot drift apart.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from kevolve.records import Candidate, Evaluation, Outcome, Problem
from kevolve.sandbox.config import Backend, SandboxConfig

if TYPE_CHECKING:
    from kevolve.sandbox import Sandbox
    from kevolve.sandbox.parent.baselines import BaselineCache
    from kevolve.sandbox.parent.local import LocalSandbox

log = logging.getLogger(__name__)
INFRA_RETRIES = 2  # "the machine broke" (infra_error) is retried this many times, never scored


def make_sandbox(config: SandboxConfig, *, lane_cores: set[int] | None = None, spare_cores: set[int] | None = None,
                 spares: int = 1, scratch_root: Path | None = None, keep_scratch: bool = False,
                 baselines: BaselineCache | None = None, reuse_baselines: bool = True,
                 fingerprint: str = "") -> LocalSandbox:
    """The sandbox `config` asks for: local runners (bubblewrap where asked or available) or
    containers, through a judge per device; with `baselines`, one that keeps problem baselines.

    Raises DockerUnavailable (one line) when containers are asked for and cannot run here, and
    IsolationUnavailable when `--isolation bwrap` is asked for without bubblewrap.
    """
    if config.backend is Backend.DOCKER:
        from kevolve.sandbox.isolate.container import DockerUnavailable, docker_client, image_present

        if not image_present(docker_client(), config.image):
            raise DockerUnavailable(f"image {config.image} not found: run `kevolve sandbox build-image`")
    else:
        from kevolve.sandbox.isolate.bwrap import local_launcher

        local_launcher(config)  # raises IsolationUnavailable now, not in the judge
    kw = dict(scratch_root=scratch_root, keep_scratch=keep_scratch, lane_cores=lane_cores, spare_cores=spare_cores,
              spares=spares)
    if baselines is not None:
        from kevolve.sandbox.parent.baselines import BenchSandbox

        return BenchSandbox(cache=baselines, reuse=reuse_baselines, fingerprint=fingerprint, **kw)  # type: ignore[arg-type]
    from kevolve.sandbox.parent.local import LocalSandbox

    return LocalSandbox(**kw)  # type: ignore[arg-type]


def evaluate_with_retries(sandbox: Sandbox, problem: Problem, candidate: Candidate, config: SandboxConfig,
                          retries: int = INFRA_RETRIES) -> tuple[Evaluation, int]:
    """(the verdict, attempts): an infra_error is the machine's fault and is tried again, anything
    else is the candidate's verdict and stands."""
    attempt = 0
    while True:
        attempt += 1
        ev = sandbox.evaluate(problem, candidate, config)
        if ev.outcome is not Outcome.INFRA_ERROR or attempt > retries:
            return ev, attempt
        log.warning("%s %s: infrastructure failure, retrying (%s)", problem.name, candidate.id, ev.reason)


__all__ = ["INFRA_RETRIES", "evaluate_with_retries", "make_sandbox"]
