"""What a sandboxed GPU process needs from the host, found the way the NVIDIA container toolkit finds it.

The toolkit hands a container its GPU as device nodes (`/dev/nvidiactl`, `/dev/nvidia-uvm`, … and
`/dev/nvidiaN` of the selected GPU only) plus the driver's user-space libraries (`libcuda.so*`,
`libnvidia-*.so*`, which must match the kernel module, so they come from the host, never the
image). Without the toolkit, sandbox/isolate/container.py passes the same things itself (as
nvidia-docker 1.0 did), and sandbox/isolate/bwrap.py binds the device nodes. Everything here takes the
host's paths as arguments, so the unit tests build the arguments from a fake /dev and lib dir.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

# Nodes every GPU process opens, whichever GPU it uses; absent ones are skipped.
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
CAPS_DIR = "nvidia-caps"  # MIG capability nodes (present on MIG-capable drivers)
_GPU_NODE = re.compile(r"^nvidia(\d+)$")
_DRIVER_LIB = re.compile(r"^(libcuda|libnvidia-[\w.+-]+?)\.so(\.[\d.]+)?$")
# Where distributions put the driver's libraries, when `ldconfig -p` does not say.
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/lib/x86_64-linux-gnu", "/lib64", "/usr/lib/wsl/lib")
INSIDE_LIB_DIR = "/usr/local/nvidia/lib64"  # where a container finds them (nvidia-docker 1.0's path)


class NoGpuNodes(RuntimeError):
    """A GPU was asked for and the host has no NVIDIA device nodes (the machine's fault)."""


@dataclass(frozen=True)
class HostGpu:
    """Where this host keeps its GPU's device nodes, per-GPU driver info and driver libraries."""

    dev: Path = Path("/dev")
    proc_gpus: Path = Path("/proc/driver/nvidia/gpus")  # one folder per GPU, named by PCI bus id
    lib_dirs: tuple[Path, ...] = tuple(Path(d) for d in LIB_DIRS)
    ldconfig: str | None = field(default=None, repr=False)  # `ldconfig -p` output; None: scan lib_dirs


def gpu_minor(index: int, host: HostGpu) -> int:
    """The /dev/nvidiaM minor of the GPU CUDA calls `index`.

    The driver lists GPUs under /proc/driver/nvidia/gpus by PCI bus id, which is CUDA's order on a
    machine of identical GPUs (and NVML's always); each says its "Device Minor". Without that
    listing, minor = index (true on almost every machine).
    """
    try:
        folders = sorted(p for p in host.proc_gpus.iterdir() if p.is_dir())
    except OSError:
        return index
    if index >= len(folders):
        return index
    try:
        text = (folders[index] / "information").read_text()
    except OSError:
        return index
    m = re.search(r"^Device Minor:\s*(\d+)", text, re.M)
    return int(m.group(1)) if m else index


def gpu_nodes(host: HostGpu, index: int | None = None) -> list[Path]:
    """The GPU device nodes to pass: the control nodes and MIG caps, plus /dev/nvidiaN of GPU
    `index` (all GPUs when None). Raises NoGpuNodes when the selected GPU's node is missing."""
    try:
        names = sorted(p.name for p in host.dev.iterdir())
    except OSError:
        names = []
    gpus = [n for n in names if _GPU_NODE.match(n)]
    if index is not None:
        want = f"nvidia{gpu_minor(index, host)}"
        gpus = [n for n in gpus if n == want]
    if not gpus:
        which = "any GPU" if index is None else f"GPU {index}"
        raise NoGpuNodes(f"no device node for {which} under {host.dev} (is the NVIDIA driver loaded?)")
    nodes = [host.dev / n for n in CONTROL_NODES if n in names] + [host.dev / n for n in gpus]
    caps = host.dev / CAPS_DIR
    if caps.is_dir():
        nodes += sorted(p for p in caps.iterdir() if not p.is_dir())
    return nodes


def is_driver_lib(name: str) -> bool:
    """A library of the driver's user space (it must match the host's kernel module)."""
    return bool(_DRIVER_LIB.match(name))


def ldconfig_listing() -> str | None:
    """`ldconfig -p`'s output (the loader's cache), or None where it cannot run."""
    for exe in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        try:
            r = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0 and r.stdout:
            return r.stdout
    return None


def driver_libs(host: HostGpu) -> list[Path]:
    """The driver's user-space libraries (libcuda.so*, libnvidia-*.so*) that exist on this host.

    From the loader's cache when given (`ldconfig -p` lines: `libcuda.so.1 (libc6,x86-64) => /usr/…`),
    else from the standard library folders. Symlinks are kept as names: each is mounted as the
    file it points to, under its own name, so `libcuda.so` and `libcuda.so.1` both resolve.
    """
    found: dict[str, Path] = {}
    if host.ldconfig:
        for m in re.finditer(r"^\s*(\S+)\s+\(([^)]*)\)\s*=>\s*(/\S+)\s*$", host.ldconfig, re.M):
            name, flags, path = m.groups()
            if _DRIVER_LIB.match(name) and ("x86-64" in flags or "AArch64" in flags):  # not the 32-bit ones
                found.setdefault(name, Path(path))
    for d in host.lib_dirs:
        try:
            entries = sorted(d.iterdir())
        except OSError:
            continue
        for p in entries:
            if _DRIVER_LIB.match(p.name):
                found.setdefault(p.name, p)
    # the versioned files the cache's symlinks point to (libcuda.so.580.95.05) are needed too
    for p in list(found.values()):
        target = p.resolve()
        if target != p and _DRIVER_LIB.match(target.name):
            found.setdefault(target.name, target)
    return [found[n] for n in sorted(found) if found[n].exists()]


@dataclass(frozen=True)
class DockerGpu:
    """What hands one GPU to a container through the docker SDK's `containers.run`."""

    devices: tuple[str, ...]  # "host:container:rwm", the SDK's `devices`
    binds: tuple[tuple[str, str], ...]  # (host file, path inside), mounted read-only
    environment: dict[str, str]


def docker_gpu(index: int, host: HostGpu) -> DockerGpu:
    """GPU `index` for a container without the NVIDIA runtime: its nodes, the driver's libraries
    read-only in INSIDE_LIB_DIR, and the environment that finds them (CUDA sees it as device 0).

    Several names may resolve to one file (libcuda.so -> libcuda.so.1 -> libcuda.so.580…); each name
    is its own bind of that file, since the image has no symlinks for them.
    """
    nodes = gpu_nodes(host, index)
    libs = driver_libs(host)
    if not any(p.name.startswith("libcuda.so") for p in libs):
        raise NoGpuNodes(f"no libcuda.so in the loader's cache or in {', '.join(map(str, host.lib_dirs))}")
    devices = tuple(f"{p}:/dev/{p.relative_to(host.dev)}:rwm" for p in nodes)
    binds = tuple((str(p.resolve()), f"{INSIDE_LIB_DIR}/{p.name}") for p in libs)
    env = {"CUDA_VISIBLE_DEVICES": "0", "LD_LIBRARY_PATH": INSIDE_LIB_DIR, "TRITON_LIBCUDA_PATH": INSIDE_LIB_DIR}
    return DockerGpu(devices=devices, binds=binds, environment=env)


__all__ = ["CONTROL_NODES", "DockerGpu", "HostGpu", "INSIDE_LIB_DIR", "NoGpuNodes", "docker_gpu", "driver_libs",
           "gpu_minor", "gpu_nodes", "is_driver_lib", "ldconfig_listing"]
