"""A problem off the device (KernelBench L1 19's 6.4 GB ReLU on a GPU: its draws made again when used, or kept as
pinned host copies) is judged as one kept on the device. KEVOLVE_RESIDENCY sends relu_big down both paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from kevolve.contract import load_problem
from kevolve.records import Candidate, Outcome
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.parent.local import LocalSandbox
from testpaths import ISOLATION

pytestmark = pytest.mark.gpu
HERE = Path(__file__).parent
PROBLEM = HERE.parent / "fixtures" / "problems" / "relu_big.py"


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> SandboxConfig:
    return SandboxConfig(device="cuda", seed=7, trials=20, max_timing_s=2.0, compile_baseline="off",
                         cache_dir=tmp_path_factory.mktemp("kevolve-cache"), timeout_s=300, policy_allow=("all",),
                         **ISOLATION)


@pytest.mark.parametrize(("mode", "residency"), [("host", "regenerated"), ("pinned", "host")])
def test_a_problem_off_the_device_is_judged_as_a_kept_one(config, mode: str, residency: str) -> None:  # noqa: ANN001
    problem = load_problem(PROBLEM)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KEVOLVE_RESIDENCY", mode)  # read by the judge this sandbox starts
        sandbox = LocalSandbox()
        try:
            summary = sandbox.reference(problem, config)
            got = {name: sandbox.evaluate(problem, Candidate.from_source((HERE / "solutions" / f"{name}.py").read_text(),
                                                                         problem.id), config)
                   for name in ("relu_cupy", "relu_alloc_reuse")}
            wrong = HERE.parent / "adversarial" / "mutates_input.py"
            bad = sandbox.evaluate(problem, Candidate.from_source(wrong.read_text(), problem.id), config)
        finally:
            sandbox.close()
    assert summary.residency == residency
    assert got["relu_cupy"].outcome is Outcome.OK, got["relu_cupy"].reason
    stale = got["relu_alloc_reuse"]  # never writes its output: the truth made again tells
    assert stale.outcome is Outcome.INCORRECT and stale.reason_code == "stale_memory", stale.reason
    assert bad.outcome is Outcome.REJECTED and bad.reason.startswith("mutated_inputs"), bad.reason
