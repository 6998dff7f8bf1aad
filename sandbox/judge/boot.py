"""The judge's entry point: `python -m kevolve.sandbox.judge.boot DEVICE LANE SPARE FDS SPARES KEEP ROOT [RUNNER]`
(started by `sandbox/parent/local.py`; the arguments are judge/serve.py's, and RUNNER the first request's runner
settings as JSON, `config.RUNNER_FIELDS` and the device: nothing secret, no seed).

Its first runners start here, before the judge imports torch (judge/serve.py): a runner's start (torch, the CUDA
context, the profiler) then overlaps the judge's own instead of following it. On the H100 machine each costs 5-6 s
cold, and a cold `kevolve eval` waited for both one after the other. Nothing here imports torch."""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger(__name__)


def early_runners(argv: list[str]) -> list[tuple[str, object]]:
    """Spare runners for the settings in argv[8], as many as a new problem asks for (serve.py `_problem`: the
    spares wanted, plus one for the eager reference); none for containers or when anything fails (the judge then
    starts its runners as before, when asked)."""
    if len(argv) <= 8 or not argv[8]:
        return []
    from kevolve.sandbox.config import Backend, SandboxConfig
    from kevolve.sandbox.judge.runner_proc import runner_key, start_local

    try:
        config = SandboxConfig.model_validate_json(argv[8])
        if config.backend is not Backend.LOCAL:
            return []
        lane = {int(c) for c in argv[2].split(",")} if argv[2] else None
        spare = {int(c) for c in argv[3].split(",")} if argv[3] else None
        if lane:
            os.sched_setaffinity(0, lane)  # as serve.main sets it: runners start where the judge runs
        n = (int(argv[5]) if argv[5] else 1) + 1
        root = argv[7] or None
        from pathlib import Path

        key = runner_key(config)
        return [(key, start_local(argv[1], Path(root) if root else None, spare, config)) for _ in range(n)]
    except Exception as e:  # noqa: BLE001 - only a head start: the judge starts its runners when asked
        log.warning("no runner started ahead: %s", e)
        return []


def main() -> None:
    from kevolve.sandbox.isolate.procfs import set_dumpable

    # the judge holds every draw's truth and the keys of its checks: its /proc files (mem, fd/) are closed to the
    # runners, which are the same user's without bubblewrap and hold no CAP_SYS_PTRACE (runner/serve.py). Not yet on
    # a GPU: the judge hands its device buffers to runners by CUDA IPC, not run non-dumpable there (a root judge is
    # out of a runner's reach anyway once the runner lacks the capability the judge holds; Landlock covers the rest)
    if not (sys.argv[1:2] and sys.argv[1].startswith("cuda")):
        set_dumpable(False)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="judge %(levelname)s %(message)s")
    early = early_runners(sys.argv)
    from kevolve.sandbox.judge import serve

    serve.main(early)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
