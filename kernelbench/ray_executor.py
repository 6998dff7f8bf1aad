"""`--executor ray`: problems as Ray tasks (one GPU each on CUDA), results streamed back.

Each task evaluates one problem's candidates with its own sandbox on the device Ray gave it and
yields every row as soon as it is decided (a streaming generator), so the driver writes results as
they finish, exactly as the local executor does. Ray is imported only here.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from pathlib import Path

from kevolve.kernelbench.runner import ProblemJob
from kevolve.kernelbench.store import ResultRow
from kevolve.sandbox.config import SandboxConfig

log = logging.getLogger(__name__)


def _problem_task(job_json: str, config_json: str, cache_root: str | None, reuse: bool, fingerprint: str,
                  retries: int):  # noqa: ANN202 - a Ray streaming generator
    from kevolve.kernelbench.runner import run_problem
    from kevolve.sandbox.parent.baselines import BaselineCache
    from kevolve.sandbox.parent.make import make_sandbox

    job = ProblemJob.model_validate_json(job_json)
    config = SandboxConfig.model_validate_json(config_json)
    if config.is_cuda:
        config = config.model_copy(update={"device": "cuda"})  # Ray set CUDA_VISIBLE_DEVICES for us
    cache = BaselineCache(Path(cache_root)) if cache_root else None
    sandbox = make_sandbox(config, baselines=cache, reuse_baselines=reuse, fingerprint=fingerprint)
    worker = f"ray:{socket.gethostname()}"
    try:
        for row in run_problem(job, sandbox, config, retries, worker):
            yield row.model_dump_json()
    finally:
        sandbox.close()


class RayExecutor:
    """Submit every problem job at once; Ray schedules them on whatever GPUs (or CPUs) it has."""

    def __init__(self, config: SandboxConfig, cache_root: Path | None, reuse: bool, fingerprint: str,
                 address: str | None = None, retries: int = 2) -> None:
        self.config, self.cache_root, self.reuse = config, cache_root, reuse
        self.fingerprint, self.address, self.retries = fingerprint, address, retries
        self.lost_tasks = 0

    def run(self, jobs: list[ProblemJob], on_result: Callable[[ResultRow], None]) -> None:
        import ray

        if not ray.is_initialized():
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, ignore_reinit_error=True)
        resources = {"num_gpus": 1} if self.config.is_cuda else {"num_cpus": 1}
        task = ray.remote(_problem_task).options(num_returns="streaming", max_retries=1, **resources)
        cfg = self.config.model_dump_json()
        root = str(self.cache_root) if self.cache_root else None
        gens = [task.remote(j.model_dump_json(), cfg, root, self.reuse, self.fingerprint, self.retries) for j in jobs]
        while gens:
            ready, _ = ray.wait(gens, num_returns=1)
            for gen in ready:
                try:
                    row = ResultRow.model_validate_json(ray.get(next(gen)))
                except StopIteration:
                    gens.remove(gen)
                    continue
                except ray.exceptions.RayError as e:  # node or task lost: what it had not sent is redone on rerun
                    log.error("a Ray task failed; its unfinished candidates stay unfinished: %s", str(e)[:300])
                    self.lost_tasks += 1
                    gens.remove(gen)
                    continue
                on_result(row)


__all__ = ["RayExecutor"]
