"""Sandboxes for the hostile-candidate tests: local workers under bubblewrap, and Docker workers.

On CI (CI=true) both backends must run: a missing bwrap or Docker engine fails the tests instead
of skipping them (.ci/run installs and starts both).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from testpaths import ISOLATION, unavailable
from kevolve.sandbox.config import Isolation

FIXTURES = Path(__file__).parent.parent.parent / "fixtures"
BACKENDS = ("bwrap", "docker")




@pytest.fixture(scope="session")
def bwrap_box() -> Iterator[object]:
    from kevolve.sandbox.isolate.bwrap import probe
    from kevolve.sandbox.parent.local import LocalSandbox

    works, why = probe("cpu", ISOLATION["bwrap"])
    if not works:
        unavailable(why)
    box = LocalSandbox()
    yield box
    box.close()


@pytest.fixture(scope="session")
def docker_box() -> Iterator[object]:
    from kevolve.sandbox.isolate.container import DockerUnavailable, docker_client
    from kevolve.sandbox.isolate.docker_image import ensure_local
    from kevolve.sandbox.parent.local import LocalSandbox

    try:
        client = docker_client()
    except DockerUnavailable as e:
        unavailable(str(e))
    ensure_local("kevolve-eval:test", client)
    box = LocalSandbox(spares=1)  # the judge starts each runner in a container (config.backend)
    yield box
    box.close()


@pytest.fixture
def hostile_config(cpu_config):  # noqa: ANN001, ANN201
    """Python-only candidates (allow_torch_only): the hostility here is not about kernels. The candidate
    policy is off: these test the isolation behind it (test_policy_layer.py tests the policy)."""
    return cpu_config.model_copy(update=dict(allow_torch_only=True, image="kevolve-eval:test",
                                             isolation=Isolation.BWRAP, memory_limit_gb=4.0, scratch_limit_gb=1.0,
                                             policy_allow=("all",)))


@pytest.fixture(scope="session")
def plain_boxes() -> dict[str, object]:
    """One LocalSandbox per containment kind, workers as plain processes (as on a GPU machine
    without bubblewrap): its reference is computed once."""
    return {}


@pytest.fixture
def plain_evaluate(plain_boxes, hostile_config) -> Callable[..., Callable[..., object]]:  # noqa: ANN001
    """plain_evaluate(kind)(source, **overrides) -> Evaluation: isolation none, containment `kind`."""
    from kevolve.contract import load_problem
    from kevolve.records import Candidate
    from kevolve.sandbox.config import Isolation
    from kevolve.sandbox.parent.local import LocalSandbox

    base = hostile_config.model_copy(update={"isolation": Isolation.NONE})
    prob = load_problem(FIXTURES / "problems" / "relu.py")

    def for_kind(kind):  # noqa: ANN001, ANN202
        box = plain_boxes.setdefault(kind, LocalSandbox())
        cfg = base.model_copy(update={"containment": kind.value})

        def run(source: str, **overrides: object):  # noqa: ANN202
            box.reference(prob, cfg)
            return box.evaluate(prob, Candidate.from_source(source, prob.id), cfg.model_copy(update=overrides))

        return run

    return for_kind


@pytest.fixture(params=BACKENDS)
def evaluate(request, hostile_config) -> Callable[..., object]:  # noqa: ANN001
    """evaluate(source, **config_overrides) -> Evaluation on the relu problem, on one backend."""
    from kevolve.contract import load_problem
    from kevolve.sandbox.config import Backend

    from kevolve.records import Candidate

    box = request.getfixturevalue(f"{request.param}_box")
    base = hostile_config.model_copy(update={"backend": Backend.DOCKER if request.param == "docker" else Backend.LOCAL})
    prob = load_problem(FIXTURES / "problems" / "relu.py")

    def run(source: str, **overrides: object):  # noqa: ANN202
        box.reference(prob, base)  # under the normal limits, whatever the overrides
        return box.evaluate(prob, Candidate.from_source(source, prob.id), base.model_copy(update=overrides))

    run.backend = request.param  # type: ignore[attr-defined]
    return run
