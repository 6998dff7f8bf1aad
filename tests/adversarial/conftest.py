"""One LocalSandbox for the adversarial suite, so each problem's reference is computed once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.fixture(scope="session")
def sandbox():  # noqa: ANN201
    from kevolve.sandbox.parent.local import LocalSandbox

    return LocalSandbox()


@pytest.fixture
def structural_config(cpu_config):  # noqa: ANN001, ANN201
    """The CPU config with the candidate policy off: these hacks must reach the checks behind it (the
    policy itself is tested statically in test_policy_layer.py)."""
    return cpu_config.model_copy(update={"policy_allow": ("all",)})


@pytest.fixture(scope="session")
def honest_relu_prebuilt() -> None:
    """The honest ReLU's extension, which 18 hacks here carry verbatim (test_adversarial.py checks that they do),
    built once by the build service into the shared cache: each hack's runner imports it (9.5 s -> 1-2 s an
    evaluation on 2 cores). Every module is still checked by the symbol check when a runner loads it."""
    from testpaths import prebuild

    prebuild((FIXTURES / "solutions" / "relu_cpp.py").read_text())


@pytest.fixture
def evaluate(sandbox, cpu_config, structural_config, honest_relu_prebuilt) -> Callable[..., object]:  # noqa: ANN001
    """evaluate(problem_name, solution_path, **config_overrides) -> Evaluation (candidate policy off)."""
    from kevolve.contract import load_problem
    from kevolve.records import Candidate

    def run(problem: str, solution: Path, **overrides: object):  # noqa: ANN202
        prob = load_problem(FIXTURES / "problems" / f"{problem}.py")
        cand = Candidate.from_source(Path(solution).read_text(), prob.id)
        sandbox.reference(prob, cpu_config)  # under the normal limits, whatever the overrides
        # validated, so that strings become the config's enums (model_copy(update=…) does not convert them)
        config = type(structural_config).model_validate({**structural_config.model_dump(), **overrides})
        return sandbox.evaluate(prob, cand, config)

    return run
