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
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kevolve.sandbox.isolation import Launcher

if TYPE_CHECKING:
    from kevolve.sandbox.config import SandboxConfig

log = logging.getLogger(__name__)

# Read-only system paths; absent ones are skipped (--ro-bind-try).
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")
# /etc is not shared whole: only what the loader, compilers and getpwuid need.
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/passwd",
        "/etc/group", "/etc/nsswitch.conf", "/etc/localtime")
_PACKAGES = ("kevolve", "kevolve.sandbox", "kevolve.kernelbench", "kevolve.agent", "kevolve.archive")
_DEV_NVIDIA = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")


def _source_dirs() -> list[str]:
    """Where kevolve's packages live (an editable install points into the checkout)."""
    dirs = []
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs += [str(Path(p).resolve()) for p in spec.submodule_search_locations]
    return sorted(set(dirs))


def _python_dirs() -> list[str]:
    """The interpreter's installation and the virtual environment (may live under a home dir)."""
    paths = {sys.base_prefix, sys.prefix, sys.exec_prefix, str(Path(sys.executable).resolve().parent.parent)}
    return sorted({str(Path(p).resolve()) for p in paths})


def _bind_system(argv: list[str]) -> None:
    for path in _SYSTEM:
        p = Path(path)
        if p.is_symlink():  # merged /usr: /bin -> usr/bin
            argv += ["--symlink", os.readlink(p), path]
        elif p.exists():
            argv += ["--ro-bind", path, path]
    for path in _ETC:
        argv += ["--ro-bind-try", path, path]


BUILD_PATH = "/kevolve-build"  # the worker's private build directory, at one path in every sandbox


def bwrap_argv(scratch: Path, readable: tuple[Path, ...] = (), pids_limit: int = 512,
               device: str = "cpu") -> list[str]:
    """bubblewrap's own arguments (up to and including `--`) for one worker in `scratch`."""
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--size", str(256 * 2**20), "--tmpfs", "/tmp"]
    _bind_system(argv)
    for path in _python_dirs() + _source_dirs():
        argv += ["--ro-bind", path, path]
    if device.startswith("cuda"):
        argv += ["--ro-bind-try", "/sys", "/sys"]  # the driver reads PCI topology from sysfs
        argv += [a for d in sorted(set(_DEV_NVIDIA) | {str(p) for p in Path("/dev").glob("nvidia[0-9]*")})
                 for a in ("--dev-bind-try", d, d)]
    for path in readable:  # the shared build cache: read-only, see compile.promote
        path.mkdir(parents=True, exist_ok=True)
        argv += ["--ro-bind", str(path), str(path)]
    (scratch / "build").mkdir(exist_ok=True)
    argv += ["--bind", str(scratch), str(scratch), "--bind", str(scratch / "build"), BUILD_PATH,
             "--chdir", str(scratch)]
    # The root that bwrap builds (a tmpfs holding the mount points) becomes read-only too: else
    # a worker running as root could write to e.g. /root or the checkout's parent in it.
    argv += ["--remount-ro", "/", "--"]
    return [*_pids_prefix(pids_limit), *argv]


def _pids_prefix(limit: int) -> list[str]:
    """Bound the worker's processes and threads, so a fork bomb runs out of slots, not the machine.

    RLIMIT_NPROC, which counts per user namespace, i.e. only the sandbox's own processes. It does
    not bind root (the kernel exempts it): there the worker's cgroup carries the limit
    (sandbox/containment.py, which gets `BwrapLauncher.pids_limit`).
    """
    return ["prlimit", f"--nproc={limit}", "--"] if shutil.which("prlimit") else []


@dataclass(frozen=True)
class BwrapLauncher:
    """A WorkerProcess launcher that runs the worker under bubblewrap."""

    cache: Path | None = None
    pids_limit: int = 512
    device: str = "cpu"
    shell_exit_codes: bool = True  # bwrap exits 128+N when the worker dies by signal N

    def argv(self, worker_argv: list[str], scratch: Path) -> list[str]:
        cache = (self.cache,) if self.cache else ()
        return [*bwrap_argv(scratch, cache, self.pids_limit, self.device), *worker_argv]

    @property
    def build_path(self) -> str:
        return BUILD_PATH


@functools.cache
def probe(device: str = "cpu") -> tuple[bool, str]:
    """(works, why): whether bubblewrap can confine a worker for this kind of device here.

    For a GPU the probe creates a CUDA context inside the sandbox (once per process), so that a
    driver needing something the sandbox hides makes `auto` fall back instead of failing every job.
    """
    if shutil.which("bwrap") is None:
        return False, "bwrap not found (install bubblewrap)"
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    code = "import kevolve.sandbox.protocol"
    if device.startswith("cuda"):
        code = "import torch; torch.empty(1, device='cuda'); torch.cuda.synchronize()"
    argv = [*bwrap_argv(scratch, device=device), sys.executable, "-c", code]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    except OSError as e:
        return False, f"bwrap failed to start: {e.strerror or type(e).__name__}"
    except subprocess.TimeoutExpired:
        return False, "bwrap did not finish a trial run within 180 s"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1][:200]
        return False, f"bwrap cannot create namespaces here: {last}"
    return True, "bwrap: no network, read-only system, private scratch and /tmp"


class IsolationUnavailable(RuntimeError):
    """isolation=bwrap was asked for and bubblewrap cannot confine workers here (a config error)."""


def local_launcher(config: SandboxConfig) -> Launcher | None:
    """The launcher that `config.isolation` asks for: bwrap, or None for plain processes."""
    from kevolve.sandbox.config import Isolation

    if config.isolation is Isolation.NONE:
        return None
    works, why = probe("cuda" if config.device.startswith("cuda") else "cpu")
    if not works:
        if config.isolation is Isolation.BWRAP:
            raise IsolationUnavailable(f"--isolation bwrap: {why}")
        _warn_once(why)
        return None
    return BwrapLauncher(config.cache_dir.resolve(), config.pids_limit, config.device)


@functools.cache
def _warn_once(why: str) -> None:
    log.warning("workers run without bubblewrap (%s); pass --isolation bwrap to refuse instead", why)


__all__ = ["IsolationUnavailable", "BwrapLauncher", "bwrap_argv", "local_launcher", "probe"]
