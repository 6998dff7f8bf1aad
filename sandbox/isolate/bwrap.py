"""Local worker confinement with bubblewrap (`bwrap`).

The worker sees a read-only view of the system directories, the Python installation and kevolve's
own source, a writable scratch directory (its private build directory at /kevolve-build inside it),
a read-only view of the shared build cache, a small private /tmp, and nothing else:
no home directory, no archive database or run folders, no /var, no network (its own empty network
namespace), its own PID/IPC/UTS namespaces, no capabilities and a process limit. It is killed when
its parent dies, and everything in its PID namespace dies with it (the kernel kills the namespace
when its first process ends).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kevolve.sandbox.isolate import pycache
from kevolve.sandbox.isolate.gpu_passthrough import HostGpu, NoGpuNodes, gpu_nodes
from kevolve.sandbox.isolate.launch import Launcher
from kevolve.sandbox.isolate.view import ETC, SYSTEM, opt_dirs, python_dirs, site_dirs, source_dirs

if TYPE_CHECKING:
    from kevolve.sandbox.config import SandboxConfig

log = logging.getLogger(__name__)

_SHM_BYTES = 256 * 2**20


def _covered(paths: list[str]) -> list[str]:
    """`paths` without those inside another of them (bound once, with their parent)."""
    out: list[str] = []
    for p in sorted(set(paths)):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


def _bind_system(argv: list[str]) -> None:
    for path in SYSTEM:
        p = Path(path)
        if p.is_symlink():  # merged /usr: /bin -> usr/bin
            argv += ["--symlink", os.readlink(p), path]
        elif p.exists():
            argv += ["--ro-bind", path, path]
    for path in ETC:
        argv += ["--ro-bind-try", path, path]


BUILD_PATH = "/kevolve-build"  # the worker's private build directory, at one path in every sandbox


def bwrap_argv(scratch: Path, readable: tuple[Path, ...] = (), pids_limit: int = 512,
               device: str = "cpu", *, binary: str = "bwrap", host: HostGpu | None = None) -> list[str]:
    """bubblewrap's own arguments (up to and including `--`) for one worker in `scratch`.

    `binary` is the bwrap to run (see `find_bwrap`); `host` says where the GPU's device nodes are
    (the real /dev unless a test passes a fake one).
    """
    argv = [binary, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--size", str(256 * 2**20), "--tmpfs", "/tmp",
            # bwrap's /dev is an unbounded tmpfs: /dev/shm gets a bounded one of its own (POSIX
            # shared memory and semaphores live there; a file filling it is RAM no RSS counts)
            "--perms", "1777", "--size", str(_SHM_BYTES), "--tmpfs", "/dev/shm"]
    _bind_system(argv)
    for path in _covered(opt_dirs() + python_dirs() + site_dirs() + source_dirs()):
        argv += ["--ro-bind", path, path]
    if device.startswith("cuda"):
        argv += _gpu_binds(host or HostGpu())
    primed = pycache.active()
    for path in (*readable, *([primed] if primed is not None else [])):  # the shared build cache (see
        # cache.promote) and the primed bytecode (pycache.py): read-only
        path.mkdir(parents=True, exist_ok=True)
        argv += ["--ro-bind", str(path), str(path)]
    (scratch / "build").mkdir(exist_ok=True)
    argv += ["--bind", str(scratch), str(scratch), "--bind", str(scratch / "build"), BUILD_PATH,
             "--chdir", str(scratch)]
    # The root that bwrap builds (a tmpfs holding the mount points) becomes read-only too: else
    # a worker running as root could write to e.g. /root or the checkout's parent in it.
    argv += ["--remount-ro", "/", "--"]
    return [*_pids_prefix(pids_limit), *argv]


def _gpu_binds(host: HostGpu) -> list[str]:
    """The GPU inside the sandbox: every NVIDIA device node (CUDA_VISIBLE_DEVICES selects the GPU,
    as without bwrap), and sysfs read-only (the driver and NVML read PCI topology there).

    The driver's libraries need nothing: /usr and /lib are bound already. /proc/driver/nvidia is
    in the sandbox's own /proc (the driver's entries are not per PID namespace).
    """
    argv = ["--ro-bind-try", "/sys", "/sys"]
    try:
        nodes = gpu_nodes(host)
    except NoGpuNodes:
        return argv  # the CUDA probe then fails and says so
    for node in nodes:
        argv += ["--dev-bind", str(node), f"/dev/{node.relative_to(host.dev)}"]
    return argv


def _pids_prefix(limit: int) -> list[str]:
    """Bound the worker's processes and threads, so a fork bomb runs out of slots, not the machine.

    RLIMIT_NPROC, which counts per user namespace, i.e. only the sandbox's own processes. It does
    not bind root (the kernel exempts it): there the worker's cgroup carries the limit
    (sandbox/isolate/containment.py, which gets `BwrapLauncher.pids_limit`).
    """
    return ["prlimit", f"--nproc={limit}", "--"] if shutil.which("prlimit") else []


@dataclass(frozen=True)
class BwrapLauncher:
    """A WorkerProcess launcher that runs the worker under bubblewrap."""

    cache: Path | None = None
    pids_limit: int = 512
    device: str = "cpu"
    binary: str = "bwrap"  # the bwrap to run (find_bwrap)
    shell_exit_codes: bool = True  # bwrap exits 128+N when the worker dies by signal N

    def argv(self, worker_argv: list[str], scratch: Path) -> list[str]:
        cache = (self.cache,) if self.cache else ()
        return [*bwrap_argv(scratch, cache, self.pids_limit, self.device, binary=self.binary), *worker_argv]

    @property
    def build_path(self) -> str:
        return BUILD_PATH


NOT_FOUND = ("bwrap not found (install bubblewrap; or, where nothing can be installed, unpack Debian's "
             "package with scripts/unpack_bwrap.sh DEB DIR and set KEVOLVE_BWRAP=DIR/usr/bin/bwrap)")


def find_bwrap(configured: str | None = None) -> tuple[str | None, str]:
    """(the bwrap binary to run, or None; why none): the configured one (`SandboxConfig.bwrap`,
    which entry points fill from KEVOLVE_BWRAP), else `bwrap` on PATH."""
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            return None, f"bwrap {configured} (KEVOLVE_BWRAP): not an executable file"
        return str(path.resolve()), ""
    found = shutil.which("bwrap")
    return (found, "") if found else (None, NOT_FOUND)


@functools.cache
def probe(device: str = "cpu", binary: str | None = None) -> tuple[bool, str]:
    """(works, why): whether bubblewrap (`binary`, else the one on PATH) can confine a worker for
    this kind of device here.

    For a GPU the probe creates a CUDA context inside the sandbox (once per process), so that a
    driver needing something the sandbox hides makes `auto` fall back instead of failing every job.
    """
    exe, why = find_bwrap(binary)
    if exe is None:
        return False, why
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    # torch is located, not imported (seconds on a loaded machine): on a GPU machine whose packages
    # sit in a folder the sandbox did not bind, this is what fails
    code = ("import importlib.util, sys, kevolve.sandbox.common.protocol\n"
            "if importlib.util.find_spec('torch') is None: sys.exit('torch is not importable inside the sandbox')")
    if device.startswith("cuda"):
        code = "import torch; torch.empty(1, device='cuda'); torch.cuda.synchronize()"
    argv = [*bwrap_argv(scratch, device=device, binary=exe), sys.executable, "-c", code]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    except OSError as e:
        return False, f"bwrap {exe} failed to start: {e.strerror or type(e).__name__}"
    except subprocess.TimeoutExpired:
        return False, f"bwrap {exe} did not finish a trial run within 180 s"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1][:200]
        if last.startswith("bwrap:"):
            return False, f"bwrap {exe} cannot create its sandbox here: {last}"
        return False, f"a trial {'CUDA ' if device.startswith('cuda') else ''}worker under bwrap {exe} failed: {last}"
    gpu = ", the GPU's device nodes" if device.startswith("cuda") else ""
    return True, f"bwrap {exe}: no network, read-only system, private scratch and /tmp{gpu}"


class IsolationUnavailable(RuntimeError):
    """isolation=bwrap was asked for and bubblewrap cannot confine workers here (a config error)."""


def local_launcher(config: SandboxConfig) -> Launcher | None:
    """The launcher that `config.isolation` asks for: bwrap, or None for plain processes."""
    from kevolve.sandbox.config import Isolation

    if config.isolation is Isolation.NONE:
        return None
    works, why = probe("cuda" if config.is_cuda else "cpu", config.bwrap)
    if not works:
        if config.isolation is Isolation.BWRAP:
            raise IsolationUnavailable(f"--isolation bwrap: {why}")
        _warn_once(why)
        return None
    exe, _ = find_bwrap(config.bwrap)
    return BwrapLauncher(config.cache_dir.resolve(), config.pids_limit, config.device, binary=exe or "bwrap")


@functools.cache
def _warn_once(why: str) -> None:
    log.warning("workers run without bubblewrap (%s); pass --isolation bwrap to refuse instead", why)


__all__ = ["IsolationUnavailable", "BwrapLauncher", "bwrap_argv", "find_bwrap", "local_launcher", "probe"]
