"""Worker process entry point: `python -m kevolve.sandbox.worker DEVICE`.

Starts warm (torch imported, device initialised, guards captured), waits for one line on stdin,
runs the job in ./request.json, writes ./report.json and ./outputs.pt, and exits without running
the candidate's atexit handlers or destructors.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> None:
    import torch
    import torch.utils.cpp_extension  # noqa: F401

    from kevolve.sandbox import candidate, harness, integrity, profile, reference, timing
    from kevolve.sandbox.protocol import WorkerReport, WorkerRequest

    scratch = Path.cwd()
    device = harness.device_of(sys.argv[1] if len(sys.argv) > 1 else "cpu")
    if device.type == "cuda":
        torch.empty(1, device=device)  # create the context now, while we wait
    guards = integrity.Guards([timing, integrity, harness, profile, candidate, reference])
    harness.set_phase(scratch, "waiting")
    if not sys.stdin.readline():
        os._exit(0)
    req = WorkerRequest.model_validate_json((scratch / "request.json").read_text())
    outs: dict[str, list[torch.Tensor]] = {}
    try:
        if req.task == "reference":
            report, outs = reference.run(req, scratch)
        else:
            report, outs = candidate.run(req, guards, scratch)
    except harness.StageError as e:
        report = WorkerReport(status=e.status, reason=e.reason, log_tail=e.log[-4000:],  # type: ignore[arg-type]
                              phase_s=e.phases)
    except BaseException as e:  # noqa: BLE001 - anything else escaping is still a verdict
        # An asynchronous CUDA fault surfaces at the harness's next CUDA call, not in forward.
        code = "cuda_error" if any(s in str(e) for s in candidate.CUDA_ERRORS) else "harness"
        phase = (scratch / "phase").read_text().strip() if (scratch / "phase").exists() else "?"
        report = WorkerReport(status="crashed", reason=f"{code}: {harness.one_line(e)} (during {phase})",
                              log_tail=harness.short_traceback(e))
    harness.set_phase(scratch, "reporting")
    torch.save(outs, scratch / "outputs.pt")
    tmp = scratch / "report.json.tmp"
    tmp.write_text(report.model_dump_json())
    os.replace(tmp, scratch / "report.json")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
