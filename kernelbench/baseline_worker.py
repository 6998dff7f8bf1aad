"""A timing-only reference worker for `kevolve bench baselines`.

It times the problem's Model exactly as the sandbox's reference worker does (the same `Timer`:
device-wide sync, cache flush, rotated inputs, adaptive trials; torch.compile timed after one
untimed call), but computes no float64 truth and hands no outputs back, so a baseline of a problem
with multi-gigabyte inputs costs its timing and little else.

It prepares ahead: given its request at start, it imports the problem, builds the model, draws
the inputs onto the device and runs one untimed forward, then waits for "go" before timing. So the
next problem's worker prepares (on other cores) while this one is timed; at "go" the parent pins the
timing worker's threads to a core no preparing worker uses.

Entry point: `python -m kevolve.kernelbench.baseline_worker DEVICE`, driven like the sandbox's
worker (request.json in, report.json out, one job, then exit). `BaselineWorker` starts it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kevolve.sandbox.isolation import WorkerProcess
from kevolve.sandbox.protocol import WorkerRequest


class BaselineWorker(WorkerProcess):
    """WorkerProcess running this module instead of the sandbox's worker (same run() protocol)."""

    def prepare(self, request: WorkerRequest, cores: set[int] | None = None) -> BaselineWorker:
        """Start it with its job, so that it sets up while something else is timed."""
        (self.scratch / "request.json").write_text(request.model_dump_json())
        self.spawn([sys.executable, "-m", "kevolve.kernelbench.baseline_worker", self.device])
        if cores and self.proc is not None:
            pin_process(self.proc.pid, cores)
        return self

    def start(self) -> BaselineWorker:
        raise TypeError("BaselineWorker needs its request up front: use prepare(request)")


def pin_process(pid: int, cores: set[int]) -> None:
    """Every thread of a process onto `cores` (threads it starts later inherit from their creator)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cores)
        except OSError:
            pass  # a thread that just ended


def _prepare(scratch: Path) -> tuple[object, object, list[object], list[str]]:
    """Everything before timing: (request, model, input pool, keys)."""
    import torch

    from kevolve.sandbox import harness as h

    req = WorkerRequest.model_validate_json((scratch / "request.json").read_text())
    device = h.device_of(req.device)
    try:
        problem = h.load_module(req.problem_source, "kevolve_problem", scratch)
    except Exception as e:  # noqa: BLE001
        raise h.StageError("problem_error", f"problem file failed to import: {h.one_line(e)}") from None
    model = h.build_model(problem.Model, problem, req.init_seed, device, "Model")
    h.set_phase(scratch, "inputs")
    pool = [h.draw_inputs(problem, d, device) for d in req.draws if d.transform == "identity"][:4]
    keys = [d.key for d in req.draws if d.transform == "identity"][: len(pool)]
    try:
        with torch.no_grad():
            model(*pool[0])
    except Exception as e:  # noqa: BLE001
        raise h.StageError("problem_error", f"Model.forward raised {h.one_line(e)}") from None
    h.sync(device)
    return req, model, pool, keys


def _time(req: WorkerRequest, model: object, pool: list, keys: list[str], scratch: Path) -> object:
    from kevolve.sandbox import harness as h
    from kevolve.sandbox.protocol import WorkerReport
    from kevolve.sandbox.reference import time_baselines

    device = h.device_of(req.device)
    phases: dict[str, float] = {}
    timing, compile_timing, log = time_baselines(req, model, pool, keys, phases, scratch)
    return WorkerReport(status="done", device_name=h.device_name(device), versions=h.versions(), timing=timing,
                        compile_timing=compile_timing, phase_s=phases, log_tail=log)


def main() -> None:
    import torch

    from kevolve.sandbox import harness as h
    from kevolve.sandbox.protocol import WorkerReport

    scratch = Path.cwd()
    device = h.device_of(sys.argv[1] if len(sys.argv) > 1 else "cpu")
    if device.type == "cuda":
        torch.empty(1, device=device)
    prepared, failure = None, None
    try:
        prepared = _prepare(scratch)
    except h.StageError as e:
        failure = WorkerReport(status=e.status, reason=e.reason)  # type: ignore[arg-type]
    except BaseException as e:  # noqa: BLE001
        failure = WorkerReport(status="crashed", reason=f"harness: {h.one_line(e)}")
    h.set_phase(scratch, "waiting")
    if not sys.stdin.readline():
        os._exit(0)
    try:
        report = failure if prepared is None else _time(*prepared, scratch)  # type: ignore[misc]
    except h.StageError as e:
        report = WorkerReport(status=e.status, reason=e.reason)  # type: ignore[arg-type]
    except BaseException as e:  # noqa: BLE001
        report = WorkerReport(status="crashed", reason=f"harness: {h.one_line(e)}")
    h.set_phase(scratch, "reporting")
    tmp = scratch / "report.json.tmp"
    tmp.write_text(report.model_dump_json())  # type: ignore[attr-defined]
    os.replace(tmp, scratch / "report.json")
    os._exit(0)


if __name__ == "__main__":
    main()
