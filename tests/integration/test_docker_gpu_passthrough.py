"""The GPU passed by hand (no NVIDIA runtime) reaches a real container: a fake host's device nodes
(character devices made with mknod) and real ELF libraries named like the driver's.

Needs a Docker engine, root (mknod) and the test image (`kevolve-eval:test`, built by the hostile
suite's fixture); what it shows: only the selected GPU's node is inside, the libraries load by
soname through LD_LIBRARY_PATH, and their folder is read-only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from testpaths import unavailable

from kevolve.sandbox.isolate.gpu_passthrough import INSIDE_LIB_DIR, HostGpu

IMAGE = "kevolve-eval:test"
PROBE = ("import os, ctypes, json; lib = ctypes.CDLL('libcuda.so.1');"
         "print(json.dumps({'dev': sorted(os.listdir('/dev')), 'libs': sorted(os.listdir(%r)), 'cuInit': lib.cuInit(0),"
         "'writable': os.access(%r, os.W_OK)}))" % (INSIDE_LIB_DIR, INSIDE_LIB_DIR))


def test_a_container_gets_the_selected_gpu_and_the_driver_libraries_without_the_toolkit(tmp_path: Path) -> None:
    import json

    from kevolve.sandbox.isolate.container import DockerUnavailable, docker_client, gpu_run_args, image_present

    try:
        client = docker_client()
    except DockerUnavailable as e:
        unavailable(str(e))
    if os.geteuid() != 0 or shutil.which("cc") is None:
        pytest.skip("needs root (mknod) and a C compiler")
    if not image_present(client, IMAGE):
        pytest.skip(f"{IMAGE} not built (tests/adversarial/hostile builds it)")
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        subprocess.run(["mknod", "-m", "666", str(dev / name), "c", "1", "3"], check=True)  # /dev/null's numbers
    lib = tmp_path / "lib"
    lib.mkdir()
    (tmp_path / "f.c").write_text("int cuInit(unsigned int flags) { return (int)flags; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(lib / "libcuda.so.580.95.05"),
                    str(tmp_path / "f.c")], check=True)
    subprocess.run(["ldconfig", "-n", str(lib)], check=True)
    kw = gpu_run_args("cuda:1", toolkit=False, host=HostGpu(dev=dev, proc_gpus=tmp_path / "none", lib_dirs=(lib,)))
    env = kw.pop("environment")
    out = client.containers.run(IMAGE, ["-c", PROBE], entrypoint=["python"], user="1000:1000", read_only=True,
                                network_mode="none", environment=env, remove=True, **kw)
    seen = json.loads(out.decode().strip().splitlines()[-1])
    assert {"nvidia1", "nvidiactl", "nvidia-uvm"} <= set(seen["dev"]) and "nvidia0" not in seen["dev"]
    assert seen["libs"] == ["libcuda.so.1", "libcuda.so.580.95.05"]
    assert seen["cuInit"] == 0 and seen["writable"] is False
