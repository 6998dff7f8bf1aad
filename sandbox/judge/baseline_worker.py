"""A timing-only reference worker for `kevolve bench baselines`.

It times the problem's Model exactly as the sandbox's reference worker does (the same `Timer`:
device-wide sync, cache flush, rotated inputs, adaptive trials; torch.compile timed after its first,
untimed call), but computes no float64 truth and hands no outputs back, so a baseline of a problem
with multi-gigabyte inputs costs its timing and little else.

Its life has two gates, so that the parent (sandbox/parent/baseline_pool.py) can run several at once
and still time one problem at a time:

1. start-up: import torch, open the device, import the problem and estimate the memory it will hold
   (on the meta device: no memory used); write `need.json`, phase `sized`, wait for a line on stdin;
2. prepare: build the model, draw the inputs onto the device, one untimed forward, and torch.compile
   with its first call (where Inductor compiles, CPU-bound for seconds); phase `waiting`, wait for
   "go" (the parent's timing token);
3. time eager and compiled, write report.json, exit.

Entry point: `python -m kevolve.sandbox.judge.baseline_worker DEVICE [COMPILE_THREADS]`, driven like the
sandbox's worker (request.json in, report.json out, one job). `BaselineWorker` starts it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from kevolve.sandbox.isolate.launch import WorkerProcess
from kevolve.sandbox.common.protocol import WorkerRequest

POOL_DRAWS = 4  # input sets rotated while timing, at most (a bench run uses 4)
_OUTPUTS_HELD = 4  # outputs alive at once while preparing and timing: eager, compiled, in flight, Inductor's
_FLUSH_BYTES = {"cuda": 256 * 2**20, "cpu": 64 * 2**20}  # the Timer's cache-flush buffer


class BaselineWorker(WorkerProcess):
    """WorkerProcess running this module instead of the sandbox's worker (same run() protocol)."""

    def prepare(self, request: WorkerRequest, cores: set[int] | None = None,
                compile_threads: int = 0) -> BaselineWorker:
        """Start it with its job; it sizes the problem, then waits for `admit()` before preparing."""
        (self.scratch / "request.json").write_text(request.model_dump_json())
        argv = [sys.executable, "-m", "kevolve.sandbox.judge.baseline_worker", self.device]
        self.spawn(argv + ([str(compile_threads)] if compile_threads > 0 else []))
        if cores and self.proc is not None:
            pin_process(self.proc.pid, cores)
        return self

    def start(self) -> BaselineWorker:
        raise TypeError("BaselineWorker needs its request up front: use prepare(request)")

    def need(self) -> tuple[bool, int | None]:
        """(sized yet, bytes its prepared problem will hold or None when the estimate failed)."""
        if self._phase() != "sized":
            return False, None
        try:
            return True, json.loads((self.scratch / "need.json").read_text())["bytes"]
        except (OSError, ValueError, KeyError):
            return True, None

    def admit(self) -> None:
        """Let it prepare (draw inputs, compile); it then waits for run()'s "go"."""
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"prepare\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died; its exit says why once it is run

    def phase(self) -> str:
        """Where the worker is: start-up, sized, inputs, compile, waiting, timing, …"""
        return self._phase()


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


def _nbytes(objs: Any) -> int:
    import torch

    from kevolve.sandbox.common import harness as h

    return sum(t.numel() * t.element_size() for t in h.flatten_outputs(objs) if isinstance(t, torch.Tensor))


def estimate_bytes(problem: Any, n_pool: int, device: str) -> int | None:
    """Memory the prepared problem holds on its device: `n_pool` input sets, the weights, a few
    outputs and the Timer's flush buffer. Worked out on the meta device (shapes, no storage); None
    when the problem cannot be built there (then the parent prepares it alone)."""
    import torch

    try:
        with torch.device("meta"), torch.no_grad():
            model = problem.Model(*problem.get_init_inputs())
            inputs = list(problem.get_inputs())
    except Exception:  # noqa: BLE001 - only an estimate
        return None
    weights = 0
    if isinstance(model, torch.nn.Module):
        weights = _nbytes(list(model.parameters()) + list(model.buffers()))
    try:
        with torch.device("meta"), torch.no_grad():
            out = _nbytes(model(*inputs))
    except Exception:  # noqa: BLE001 - an op without a meta kernel: outputs as large as the largest input
        out = max((_nbytes(x) for x in inputs), default=0)
    flush = _FLUSH_BYTES["cuda" if device.startswith("cuda") else "cpu"]
    return weights + n_pool * _nbytes(inputs) + _OUTPUTS_HELD * out + flush


def _load(req: WorkerRequest, scratch: Path) -> Any:
    from kevolve.sandbox.common import harness as h

    try:
        return h.load_module(req.problem_source, "kevolve_problem", scratch)
    except Exception as e:  # noqa: BLE001
        raise h.StageError("problem_error", f"problem file failed to import: {h.one_line(e)}") from None


def _prepare(req: WorkerRequest, problem: Any, scratch: Path) -> tuple[Any, Any, list[Any], list[str], str]:
    """Everything before timing: (model, compiled model or None, input pool, keys, compile note)."""
    import torch

    from kevolve.sandbox.common import harness as h
    from kevolve.sandbox.judge.reference import compile_reference

    device = h.device_of(req.device)
    model = h.build_model(problem.Model, problem, req.init_seed, device, "Model")
    h.set_phase(scratch, "inputs")
    pool = [h.draw_inputs(problem, d, device) for d in req.draws if d.transform == "identity"][:POOL_DRAWS]
    keys = [d.key for d in req.draws if d.transform == "identity"][: len(pool)]
    try:
        with torch.no_grad():
            model(*pool[0])
    except Exception as e:  # noqa: BLE001
        raise h.StageError("problem_error", f"Model.forward raised {h.one_line(e)}") from None
    h.sync(device)
    compiled, note = None, ""
    if req.time_compile:
        h.set_phase(scratch, "compile")
        compiled, note = compile_reference(model, pool, device)
    return model, compiled, pool, keys, note


def _time(req: WorkerRequest, prepared: tuple[Any, Any, list[Any], list[str], str], scratch: Path) -> Any:
    from kevolve.sandbox.common import harness as h
    from kevolve.sandbox.common.protocol import WorkerReport
    from kevolve.sandbox.judge.reference import time_baselines

    model, compiled, pool, keys, note = prepared
    device = h.device_of(req.device)
    phases: dict[str, float] = {}
    start = time.time()
    timing, compile_timing, log = time_baselines(req, model, compiled, pool, keys, phases, scratch)
    window = (start, time.time())
    return WorkerReport(status="done", device_name=h.device_name(device), versions=h.versions(), timing=timing,
                        compile_timing=compile_timing, phase_s=phases, log_tail=note or log, timed_window=window)


def _failure(e: BaseException) -> Any:
    from kevolve.sandbox.common import harness as h
    from kevolve.sandbox.common.protocol import WorkerReport

    if isinstance(e, h.StageError):
        return WorkerReport(status=e.status, reason=e.reason)  # type: ignore[arg-type]
    return WorkerReport(status="crashed", reason=f"harness: {h.one_line(e)}")


def main() -> None:
    import torch

    from kevolve.sandbox.common import harness as h

    scratch = Path.cwd()
    device = h.device_of(sys.argv[1] if len(sys.argv) > 1 else "cpu")
    if len(sys.argv) > 2:  # compile threads per worker: several workers compile at once
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = int(sys.argv[2])
    if device.type == "cuda":
        torch.empty(1, device=device)
    req = WorkerRequest.model_validate_json((scratch / "request.json").read_text())
    problem, failure, need = None, None, None
    try:
        problem = _load(req, scratch)
        n_pool = min(POOL_DRAWS, sum(d.transform == "identity" for d in req.draws))
        need = estimate_bytes(problem, n_pool, req.device)
    except BaseException as e:  # noqa: BLE001
        failure, need = _failure(e), 0
    (scratch / "need.json").write_text(json.dumps({"bytes": need}))
    h.set_phase(scratch, "sized")
    if not sys.stdin.readline():
        os._exit(0)
    prepared = None
    if failure is None:
        try:
            prepared = _prepare(req, problem, scratch)
        except BaseException as e:  # noqa: BLE001
            failure = _failure(e)
    h.set_phase(scratch, "waiting")
    if not sys.stdin.readline():
        os._exit(0)
    try:
        report = failure if prepared is None else _time(req, prepared, scratch)
    except BaseException as e:  # noqa: BLE001
        report = _failure(e)
    h.set_phase(scratch, "reporting")
    tmp = scratch / "report.json.tmp"
    tmp.write_text(report.model_dump_json())  # type: ignore[union-attr]
    os.replace(tmp, scratch / "report.json")
    os._exit(0)


if __name__ == "__main__":
    main()
