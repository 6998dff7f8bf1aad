"""The GPU handed to a sandbox, built from a fake host: device nodes, driver libraries, selection.

No GPU here: the host is a temp dir with files named like the driver's nodes (/dev/nvidia0 …), the
driver's per-GPU `information` files (in nv-procfs.c's format), and real ELF libraries named like
the driver's, indexed by the real `ldconfig`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kevolve.sandbox.isolate.gpu_passthrough import (INSIDE_LIB_DIR, HostGpu, NoGpuNodes, docker_gpu, driver_libs,
                                                      gpu_nodes)

NODES = ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
DRIVER_SONAMES = {"libcuda.so.580.95.05": "libcuda.so.1", "libnvidia-ml.so.580.95.05": "libnvidia-ml.so.1",
                  "libnvidia-ptxjitcompiler.so.580.95.05": "libnvidia-ptxjitcompiler.so.1"}
OTHER_SONAMES = {"libcudart.so.13.0.48": "libcudart.so.13", "libnvrtc.so.13.0.48": "libnvrtc.so.13"}


def information(bus: str, minor: int) -> str:
    """/proc/driver/nvidia/gpus/BUS/information as the driver writes it (kernel-open/nvidia/nv-procfs.c:
    `"Bus Location: \\t %04x:%02x:%02x.%x\\n"`, `"Device Minor: \\t %u\\n"`)."""
    return (f"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 147\nGPU UUID: \t GPU-{minor}\n"
            f"Video BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
            f"DMA Mask: \t 0xfffffffffffff\nBus Location: \t {bus}\nDevice Minor: \t {minor}\nGPU Excluded:\t No\n")


@pytest.fixture
def host(tmp_path: Path) -> HostGpu:
    """Two GPUs whose minors run against PCI order (CUDA's GPU 0, the lower bus id, is /dev/nvidia1)."""
    dev = tmp_path / "dev"
    (dev / "nvidia-caps").mkdir(parents=True)
    for name in (*NODES, "null", "nvidia-caps/nvidia-cap1"):
        (dev / name).write_text("")
    gpus = tmp_path / "proc" / "gpus"
    for bus, minor in (("0000:18:00.0", 1), ("0000:2a:00.0", 0)):
        (gpus / bus).mkdir(parents=True)
        (gpus / bus / "information").write_text(information(bus, minor))
    return HostGpu(dev=dev, proc_gpus=gpus, lib_dirs=())


@pytest.fixture
def libdir(tmp_path: Path) -> Path:
    """Real shared libraries with the driver's sonames (and two CUDA runtime ones that are not the
    driver's), linked by ldconfig as on a host: libcuda.so.1 -> libcuda.so.580.95.05."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or shutil.which("ldconfig") is None:
        pytest.skip("needs a C compiler and ldconfig to make real shared libraries")
    lib = tmp_path / "lib"
    lib.mkdir()
    src = tmp_path / "f.c"
    src.write_text("int f(void) { return 0; }\n")
    for filename, soname in {**DRIVER_SONAMES, **OTHER_SONAMES}.items():
        subprocess.run([cc, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(lib / filename), str(src)],
                       check=True)
    subprocess.run(["ldconfig", "-n", str(lib)], check=True)  # the soname links, as the installer leaves them
    (lib / "libcuda.so").symlink_to("libcuda.so.1")  # the development link the driver package adds
    return lib


def ldconfig_cache(tmp_path: Path, libdir: Path) -> str:
    """`ldconfig -p` of a loader cache that indexes `libdir`, only its entries (the real cache of
    this machine is indexed too, and a GPU machine has a real libcuda there)."""
    conf = tmp_path / "ld.so.conf"
    conf.write_text(f"{libdir}\n")
    cache = tmp_path / "ld.so.cache"
    subprocess.run(["ldconfig", "-C", str(cache), "-f", str(conf)], check=True, capture_output=True)
    out = subprocess.run(["ldconfig", "-p", "-C", str(cache)], check=True, capture_output=True, text=True).stdout
    return "".join(line + "\n" for line in out.splitlines() if str(libdir) in line)


def test_bwrap_on_a_gpu_binds_every_nvidia_node_at_its_dev_path(host: HostGpu, tmp_path: Path) -> None:
    from kevolve.sandbox.isolate.bwrap import bwrap_argv

    (tmp_path / "scratch").mkdir()
    argv = bwrap_argv(tmp_path / "scratch", device="cuda", host=host)
    binds = {(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == "--dev-bind"}
    want = {(str(host.dev / n), f"/dev/{n}") for n in (*NODES, "nvidia-caps/nvidia-cap1")}
    assert binds == want
    assert ("--ro-bind-try", "/sys", "/sys") in set(zip(argv, argv[1:], argv[2:]))
    cpu = bwrap_argv(tmp_path / "scratch", device="cpu", host=host)
    assert "--dev-bind" not in cpu and "/sys" not in cpu


def test_bwrap_with_a_fake_gpu_shows_its_nodes_inside_the_sandbox(host: HostGpu, tmp_path: Path) -> None:
    from kevolve.sandbox.isolate.bwrap import bwrap_argv, probe

    works, why = probe("cpu")
    if not works:
        pytest.skip(why)
    (tmp_path / "scratch").mkdir()
    argv = bwrap_argv(tmp_path / "scratch", device="cuda", host=host)
    r = subprocess.run([*argv, "sh", "-c", "ls /dev /dev/nvidia-caps; touch /dev/shm/probe && echo shm-writable"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    seen = set(r.stdout.split())
    assert {*NODES, "nvidia-cap1", "shm-writable"} <= seen


def test_the_selected_gpu_is_found_by_its_device_minor_not_its_index(host: HostGpu) -> None:
    assert [p.name for p in gpu_nodes(host, 0)] == [
        "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia1", "nvidia-cap1"]
    assert "nvidia0" in [p.name for p in gpu_nodes(host, 1)] and "nvidia1" not in [p.name for p in gpu_nodes(host, 1)]
    with pytest.raises(NoGpuNodes, match="GPU 2"):
        gpu_nodes(host, 2)


def test_without_the_drivers_listing_the_minor_is_the_index(host: HostGpu, tmp_path: Path) -> None:
    bare = HostGpu(dev=host.dev, proc_gpus=tmp_path / "absent", lib_dirs=())
    assert "nvidia0" in [p.name for p in gpu_nodes(bare, 0)]


def test_driver_libraries_come_from_the_loader_cache_and_not_the_cuda_runtime(libdir: Path, tmp_path: Path) -> None:
    text = ldconfig_cache(tmp_path, libdir)
    assert "libcuda.so.1 (libc6,x86-64) => " in text  # what the parser reads, as ldconfig writes it
    names = {p.name for p in driver_libs(HostGpu(lib_dirs=(), ldconfig=text))}
    assert names == {"libcuda.so", "libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1",
                     *DRIVER_SONAMES}


def test_driver_libraries_are_found_in_the_lib_dirs_without_ldconfig(libdir: Path) -> None:
    names = {p.name for p in driver_libs(HostGpu(lib_dirs=(libdir,)))}
    assert names == {"libcuda.so", "libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1",
                     *DRIVER_SONAMES}


def test_docker_gets_one_gpu_its_control_nodes_and_the_driver_read_only(host: HostGpu, libdir: Path) -> None:
    gpu = docker_gpu(1, HostGpu(dev=host.dev, proc_gpus=host.proc_gpus, lib_dirs=(libdir,)))
    assert set(gpu.devices) == {f"{host.dev}/{n}:/dev/{n}:rwm" for n in
                                ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia0")} | {
        f"{host.dev}/nvidia-caps/nvidia-cap1:/dev/nvidia-caps/nvidia-cap1:rwm"}
    inside = dict((b, a) for a, b in gpu.binds)
    assert inside[f"{INSIDE_LIB_DIR}/libcuda.so.1"] == str(libdir / "libcuda.so.580.95.05")
    assert inside[f"{INSIDE_LIB_DIR}/libcuda.so"] == str(libdir / "libcuda.so.580.95.05")
    assert not any("cudart" in b or "nvrtc" in b for b in inside)
    assert gpu.environment == {"CUDA_VISIBLE_DEVICES": "0", "LD_LIBRARY_PATH": INSIDE_LIB_DIR,
                               "TRITON_LIBCUDA_PATH": INSIDE_LIB_DIR}


def test_docker_without_libcuda_or_without_the_node_is_the_machines_fault(host: HostGpu, libdir: Path) -> None:
    with pytest.raises(NoGpuNodes, match="libcuda"):
        docker_gpu(0, host)  # no lib dirs, no cache
    empty = host.dev.parent / "emptydev"
    empty.mkdir()
    with pytest.raises(NoGpuNodes, match="no device node"):
        docker_gpu(0, HostGpu(dev=empty, proc_gpus=host.proc_gpus, lib_dirs=(libdir,)))


class FakeEngine:
    """The two calls of the docker SDK a container start makes: `info()` (the Engine API's /info,
    whose `Runtimes` maps a runtime's name to its path) and `containers.run(...)`, recorded."""

    def __init__(self, runtimes: dict[str, dict[str, str]]) -> None:
        self.runtimes = runtimes
        self.runs: list[dict[str, object]] = []
        self.containers = self

    def info(self) -> dict[str, object]:
        return {"Runtimes": self.runtimes, "DefaultRuntime": "runc"}

    def run(self, image: str, command: list[str], **kw: object) -> object:
        self.runs.append(kw)
        return object()


def start_container(engine: FakeEngine, device: str, tmp_path: Path, gpu_host: HostGpu | None = None):  # noqa: ANN201
    from kevolve.sandbox.config import SandboxConfig
    from kevolve.sandbox.isolate.container import ContainerRunner

    config = SandboxConfig(device=device, cache_dir=tmp_path / "cache", backend="docker")
    ContainerRunner(engine, config, root=tmp_path, gpu_host=gpu_host).start()
    return engine.runs[-1]


def test_a_container_without_the_nvidia_runtime_gets_the_gpu_passed_by_hand(host, libdir, tmp_path) -> None:  # noqa: ANN001
    engine = FakeEngine({"runc": {"path": "runc"}})
    kw = start_container(engine, "cuda:1", tmp_path, HostGpu(dev=host.dev, proc_gpus=host.proc_gpus, lib_dirs=(libdir,)))
    assert "device_requests" not in kw
    assert f"{host.dev}/nvidia0:/dev/nvidia0:rwm" in kw["devices"]
    assert not any("nvidia1:" in d for d in kw["devices"])
    mounts = {m["Target"]: m for m in kw["mounts"]}
    assert mounts[f"{INSIDE_LIB_DIR}/libcuda.so.1"]["ReadOnly"] is True
    assert mounts[f"{INSIDE_LIB_DIR}/libcuda.so.1"]["Source"] == str(libdir / "libcuda.so.580.95.05")
    env = kw["environment"]
    assert env["LD_LIBRARY_PATH"] == INSIDE_LIB_DIR and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["HOME"] == "/scratch" and env["TRITON_CACHE_DIR"] == "/scratch/triton"


def test_a_container_with_the_nvidia_runtime_gets_its_device_request(tmp_path) -> None:  # noqa: ANN001
    engine = FakeEngine({"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}})
    kw = start_container(engine, "cuda:2", tmp_path, HostGpu(dev=tmp_path / "no-dev"))  # the host is not looked at
    (request,) = kw["device_requests"]
    assert request["DeviceIDs"] == ["2"] and request["Capabilities"] == [["gpu"]]
    assert "devices" not in kw and "mounts" not in kw


def test_a_cpu_container_gets_no_gpu(tmp_path) -> None:  # noqa: ANN001
    kw = start_container(FakeEngine({"runc": {"path": "runc"}}), "cpu", tmp_path)
    assert not {"devices", "mounts", "device_requests"} & set(kw)


def test_a_gpu_container_on_a_host_without_the_driver_is_docker_unavailable_in_one_line(host, tmp_path) -> None:  # noqa: ANN001
    from kevolve.sandbox.isolate.container import DockerUnavailable

    with pytest.raises(DockerUnavailable, match="no NVIDIA container runtime.*libcuda") as e:
        start_container(FakeEngine({"runc": {"path": "runc"}}), "cuda", tmp_path, host)
    assert "\n" not in str(e.value)
