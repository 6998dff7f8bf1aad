"""The audit's noise floor on a GPU: N evaluations of the honest CuPy ReLU (tests/gpu) with their audits, each side's
median call printed (candidate and eager; the evaluation's and the audit's), so the spread between fresh processes is
read from one honest kernel. On the device machine, from the repository root:

    python3 -P scripts/audit_noise.py [N]      (KEVOLVE_TEST_ISOLATION / KEVOLVE_BWRAP as for tests/gpu)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main(n: int) -> None:
    from testpaths import ISOLATION

    from kevolve.contract import load_problem
    from kevolve.records import Candidate
    from kevolve.sandbox.config import SandboxConfig
    from kevolve.sandbox.parent.local import LocalSandbox

    problem = load_problem(ROOT / "tests" / "fixtures" / "problems" / "relu_big.py")
    source = (ROOT / "tests" / "gpu" / "solutions" / "relu_cupy.py").read_text()
    config = SandboxConfig(device="cuda", seed=7, trials=20, max_timing_s=2.0, compile_baseline="off", audit=True,
                           cache_dir=Path(tempfile.mkdtemp()), timeout_s=300, policy_allow=("all",), **ISOLATION)
    sandbox = LocalSandbox()
    f = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
    print("#  outcome  | evaluation: speedup cand_ms eager_ms | audit: speedup cand_ms eager_ms clock | s | reason")
    for i in range(n):
        t0 = time.time()
        ev = sandbox.evaluate(problem, Candidate.from_source(source, problem.id), config.model_copy(update={"seed": 7 + i}))
        a = ev.audit
        lowered = a is not None and a.evaluation_speedup is not None
        # where the audit's lower speed stands, the verdict's times are the audit's: the evaluation's speedup is kept apart
        s0 = a.evaluation_speedup if lowered else (ev.eager_ms / ev.runtime_ms if ev.eager_ms and ev.runtime_ms else None)
        print(f"#{i} {ev.outcome.value:8} | {f(s0)} {'' if lowered else f(ev.runtime_ms)} {'' if lowered else f(ev.eager_ms)} | "
              f"{f(a and a.speedup)} {f(a and a.candidate_ms)} {f(a and a.eager_ms)} {f(a and a.judge_clock_speedup)} | "
              f"{time.time() - t0:.0f} | {(a.reason if a else ev.reason)[:200]}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
