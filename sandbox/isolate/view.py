"""The file-system view a runner gets, one list for both confinements: bubblewrap binds exactly these read-only
(bwrap.py), Landlock allows reading exactly these (landlock.py); the runner's scratch, the build cache and the
primed bytecode are added by each."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

# Read-only system paths; absent ones are skipped (--ro-bind-try).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")
# /etc is not shared whole: only what the loader, compilers and getpwuid need.
ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/passwd",
       "/etc/group", "/etc/nsswitch.conf", "/etc/localtime")
PACKAGES = ("kevolve", "kevolve.sandbox", "kevolve.kernelbench", "kevolve.agent", "kevolve.archive")


def source_dirs() -> list[str]:
    """Where kevolve's packages live (an editable install points into the checkout)."""
    dirs = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs += [str(Path(p).resolve()) for p in spec.submodule_search_locations]
    return sorted(set(dirs))


def python_dirs() -> list[str]:
    """The interpreter's installation and the virtual environment (may live under a home dir)."""
    paths = {sys.base_prefix, sys.prefix, sys.exec_prefix, str(Path(sys.executable).resolve().parent.parent)}
    return sorted({str(Path(p).resolve()) for p in paths})


@functools.cache
def site_dirs() -> list[str]:
    """The folders holding the worker's dependencies (torch, CuPy, Triton …) where they are not in the
    Python installation: a `pip install --target` folder on PYTHONPATH, a user site. Only those: a
    sys.path entry such as the checkout (pytest puts it there) may hold run folders and secrets."""
    from kevolve.sandbox.isolate.docker_image import GPU_DISTS, WORKER_DISTS, _dist_closure

    return sorted({str(Path(str(d.locate_file(""))).resolve()) for d in _dist_closure(WORKER_DISTS + GPU_DISTS)})


__all__ = ["ETC", "PACKAGES", "SYSTEM", "python_dirs", "site_dirs", "source_dirs"]
