"""GPU faults are verdicts under the tests' isolation (KEVOLVE_TEST_ISOLATION=bwrap on a GPU machine
with bubblewrap), and the GPU passthrough finds this machine's real nodes and driver libraries."""

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
PROBLEM = HERE.parent / "fixtures" / "problems" / "relu.py"


@pytest.fixture(scope="module")
def sandbox():  # noqa: ANN201
    box = LocalSandbox(spares=2)
    yield box
    box.close()


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> SandboxConfig:
    return SandboxConfig(device="cuda", seed=7, trials=5, max_timing_s=0.5, compile_baseline="off", timeout_s=60,
                         cache_dir=tmp_path_factory.mktemp("kevolve-cache"), policy_allow=("all",), **ISOLATION)


def evaluate(sandbox: LocalSandbox, config: SandboxConfig, name: str, **overrides: object):  # noqa: ANN201
    problem = load_problem(PROBLEM)
    src = (HERE / "solutions" / f"{name}.py").read_text()
    return sandbox.evaluate(problem, Candidate.from_source(src, problem.id), config.model_copy(update=overrides))


def test_a_kernel_that_never_ends_is_a_timeout_and_the_gpu_is_free_again(sandbox, config) -> None:  # noqa: ANN001
    ev = evaluate(sandbox, config, "kernel_never_ends", timeout_s=10.0)
    assert ev.outcome is Outcome.TIMEOUT, ev.reason
    again = evaluate(sandbox, config, "relu_cupy")
    assert again.outcome is Outcome.OK, again.reason


def test_taking_all_device_memory_is_a_runtime_error_and_the_memory_comes_back(sandbox, config) -> None:  # noqa: ANN001
    ev = evaluate(sandbox, config, "device_oom")
    assert ev.outcome is Outcome.RUNTIME_ERROR and "OutOfMemoryError" in ev.reason, ev.reason
    again = evaluate(sandbox, config, "relu_cupy")
    assert again.outcome is Outcome.OK, again.reason


def test_the_passthrough_finds_this_machines_gpu_node_and_libcuda() -> None:
    import torch

    from kevolve.sandbox.isolate.gpu_passthrough import HostGpu, docker_gpu, gpu_minor, ldconfig_listing

    host = HostGpu(ldconfig=ldconfig_listing())
    gpu = docker_gpu(0, host)
    minor = gpu_minor(0, host)
    assert f"/dev/nvidia{minor}:/dev/nvidia{minor}:rwm" in gpu.devices and "/dev/nvidiactl:/dev/nvidiactl:rwm" in gpu.devices
    names = {inside.rsplit("/", 1)[1] for _src, inside in gpu.binds}
    assert "libcuda.so.1" in names
    # CUDA's GPU 0 is the driver's first GPU by bus id, whose information file gpu_minor read
    first = sorted(p for p in host.proc_gpus.iterdir() if p.is_dir())[0]
    assert str(torch.cuda.get_device_properties(0).uuid).lower() in (first / "information").read_text().lower()
