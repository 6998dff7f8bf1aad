"""The file-system view a runner gets, one list for both confinements: bubblewrap binds exactly these read-only
(bwrap.py), Landlock allows reading exactly these (landlock.py); the runner's scratch, the build cache and the
primed bytecode are added by each."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import sys
from pathlib import Path

# Read-only system paths; absent ones are skipped (--ro-bind-try). /opt only where a toolchain is (opt_dirs).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# where a runner's toolchain may be named: its folders under /opt are in the view (opt_dirs)
TOOL_VARS = ("PATH", "LD_LIBRARY_PATH", "CPATH", "LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH")
TOOLS = ("nvcc", "gcc", "g++", "cc", "c++", "ld", "ninja")
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
    """The interpreter's installation and the virtual environment (may live under a home dir): their folders and a
    venv's pyvenv.cfg, not the other files at their top, where pip reads a site-wide pip.conf (an index login in it
    was read by red team 8's native code under both confinements)."""
    roots = {sys.base_prefix, sys.prefix, sys.exec_prefix, str(Path(sys.executable).resolve().parent.parent)}
    out: set[str] = set()
    for root in {Path(p).resolve() for p in roots}:
        try:
            out |= {str(c) for c in root.iterdir() if c.is_dir() or c.name == "pyvenv.cfg"}
        except OSError:
            continue
    return sorted(out)


def opt_dirs() -> list[str]:
    """The folders of /opt that hold the runner's toolchain: named on TOOL_VARS or where a compiler of TOOLS on PATH
    resolves to. Not the rest of /opt, where vendor software keeps its configuration and keys (red team 8 read a
    planted credential file there under both confinements)."""
    named = [p for v in TOOL_VARS for p in os.environ.get(v, "").split(os.pathsep) if p]
    named += [w for t in TOOLS if (w := shutil.which(t))]
    tops = {parts[2] for p in named if len(parts := Path(os.path.realpath(p)).parts) > 2 and parts[1] == "opt"}
    return sorted(f"/opt/{t}" for t in tops if Path("/opt", t).is_dir())


@functools.cache
def site_dirs() -> list[str]:
    """The folders holding the worker's dependencies (torch, CuPy, Triton …) where they are not in the
    Python installation: a `pip install --target` folder on PYTHONPATH, a user site. Only those: a
    sys.path entry such as the checkout (pytest puts it there) may hold run folders and secrets."""
    from kevolve.sandbox.isolate.docker_image import GPU_DISTS, WORKER_DISTS, _dist_closure

    return sorted({str(Path(str(d.locate_file(""))).resolve()) for d in _dist_closure(WORKER_DISTS + GPU_DISTS)})


__all__ = ["ETC", "PACKAGES", "SYSTEM", "TOOLS", "TOOL_VARS", "opt_dirs", "python_dirs", "site_dirs", "source_dirs"]
