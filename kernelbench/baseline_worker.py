"""A timing-only reference worker for `kevolve bench baselines`.

It times the problem's Model exactly as the sandbox's reference worker does (the same `Timer`:
device-wide sync, cache flush, rotated inputs, adaptive trials; torch.compile timed after one
untimed call), but computes no float64 truth and hands no outputs back, so a baseline of a problem
with multi-gigabyte inputs costs its timing and little else.

Entry point: `python -m kevolve.kernelbench.baseline_worker DEVICE`, driven like the sandbox's
worker (request.json in, report.json out, one job, then exit). `BaselineWorker` starts it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kevolve.sandbox.isolation import WorkerProcess, scrubbed_env


class BaselineWorker(WorkerProcess):
    """WorkerProcess running this module instead of the sandbox's worker (same run() protocol)."""

    def start(self) -> BaselineWorker:
        env = scrubbed_env(self.device, self.scratch)
        with open(self.scratch / "worker.log", "wb") as logf:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kevolve.kernelbench.baseline_worker", self.device],
                stdin=subprocess.PIPE, stdout=logf, stderr=subprocess.STDOUT, cwd=self.scratch, env=env,
                start_new_session=True, close_fds=True)
        return self


def _job(scratch: Path) -> object:
    import torch

    from kevolve.sandbox import harness as h
    from kevolve.sandbox.protocol import WorkerReport, WorkerRequest
    from kevolve.sandbox.timing import Timer

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
    timer = Timer(device)
    phases: dict[str, float] = {}
    h.set_phase(scratch, "timing")
    t0 = time.perf_counter()
    with torch.no_grad():
        timing = timer.run(model, pool, keys, req.trials, req.max_timing_s, req.warmup)
    phases["reference_timing"] = time.perf_counter() - t0
    compile_timing, log = None, ""
    if req.time_compile:
        h.set_phase(scratch, "compile_baseline")
        t0 = time.perf_counter()
        try:
            compiled = torch.compile(model)
            with torch.no_grad():
                compiled(*pool[0])
                compile_timing = timer.run(compiled, pool, keys, req.trials, req.max_timing_s, req.warmup)
        except Exception as e:  # noqa: BLE001 - torch.compile failing is data
            log = f"torch.compile baseline unavailable: {h.one_line(e)}"
        phases["compile_baseline"] = time.perf_counter() - t0
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
    h.set_phase(scratch, "waiting")
    if not sys.stdin.readline():
        os._exit(0)
    try:
        report = _job(scratch)
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
