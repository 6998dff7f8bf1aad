"""A problem whose draws the judge makes again when used (residency "regenerated": KernelBench L1 19's 6.4 GB ReLU
on a GPU) is judged as one kept in full: honest `ok`, an input written to and an answer repeated from another draw
caught. KEVOLVE_RESIDENCY=host sends the small ReLU down that path on the CPU (the judge's own switch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kevolve.records import Outcome

HERE = Path(__file__).parent
FIXTURES = HERE.parent / "fixtures"


@pytest.fixture(scope="module")
def regenerated():  # noqa: ANN201
    from kevolve.sandbox.parent.local import LocalSandbox

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KEVOLVE_RESIDENCY", "host")  # read by the judge, started with this sandbox's first request
        sandbox = LocalSandbox()
        yield sandbox
        sandbox.close()


@pytest.mark.parametrize(("solution", "outcome", "code"), [
    (FIXTURES / "solutions" / "relu_cpp.py", Outcome.OK, ""),
    (HERE / "mutates_input.py", Outcome.REJECTED, "mutated_inputs"),
    (HERE / "cache_keyed_on_shape.py", Outcome.INCORRECT, "stale_cache"),
], ids=lambda v: v.stem if isinstance(v, Path) else None)
def test_a_regenerated_problem_is_judged_as_a_kept_one(regenerated, structural_config, cpu_config,  # noqa: ANN001
                                                         honest_relu_prebuilt, solution: Path, outcome: Outcome,
                                                         code: str) -> None:
    from kevolve.contract import load_problem
    from kevolve.records import Candidate

    prob = load_problem(FIXTURES / "problems" / "relu.py")
    summary = regenerated.reference(prob, cpu_config)
    assert summary.residency == "regenerated", summary.residency
    ev = regenerated.evaluate(prob, Candidate.from_source(solution.read_text(), prob.id), structural_config)
    assert ev.outcome is outcome and ev.reason.startswith(code), ev.reason
    if outcome is Outcome.OK:
        assert ev.speedup is not None and ev.checks and all(c.passed for c in ev.checks)
