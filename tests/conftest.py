"""Shared fixtures: paths to the project's own problems and solutions, a CPU sandbox config."""

from __future__ import annotations

from pathlib import Path

import pytest
from testpaths import BUILD_CACHE, FIXTURES, ISOLATION, ensure_shared_pch


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def shared_pch() -> None:
    """The build service's precompiled header in the tests' shared build cache, made once (testpaths)."""
    ensure_shared_pch()


@pytest.fixture(autouse=True)
def _cold_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `kevolve eval` a test starts runs cold (each test has its own $HOME, and a warm judge service left
    per test would idle for minutes beside the suite); tests/integration/test_warm_eval.py turns it back on."""
    monkeypatch.setenv("KEVOLVE_WARM", "0")


@pytest.fixture(autouse=True)
def _shared_pch_where_extensions_are_built(request: pytest.FixtureRequest) -> None:
    """Integration and adversarial tests build C++ extensions in the shared cache (the evaluator's, bench's,
    optimize's): they get the precompiled header first. Unit tests never wait for it."""
    if any(part in ("integration", "adversarial") for part in request.path.parts):
        request.getfixturevalue("shared_pch")


@pytest.fixture
def cpu_config(shared_pch):  # noqa: ANN001, ANN201
    from kevolve.sandbox.config import SandboxConfig

    return SandboxConfig(device="cpu", timeout_s=240, trials=10, max_timing_s=2.0, seed=1234,
                         cache_dir=BUILD_CACHE, memory_limit_gb=8, **ISOLATION)
