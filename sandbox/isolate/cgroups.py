"""Control groups for workers: one cgroup v2 per worker, killed whole, plus a process limit.

Where this process may create cgroups (root, or a delegated subtree), each worker goes into
`<this process's cgroup>/kevolve.slice/w-<owner pid>-<owner start>-<token>` before it runs anything
(a shell joins it, then becomes the worker). Everything the worker starts stays in that cgroup,
whatever it does with sessions or process groups; `cgroup.kill` (Linux 5.14) kills all of it at
once, or, on older kernels, the cgroup is frozen and every member gets SIGKILL.

The process limit (`pids.max`) goes into the same cgroup when the v2 pids controller is delegated
to it; on hybrid hosts (controllers on cgroup v1, as here) a v1 pids cgroup of the same name.
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from kevolve.sandbox.isolate import procfs

log = logging.getLogger(__name__)

SLICE = "kevolve.slice"
_V1_PIDS = Path("/sys/fs/cgroup/pids")  # the cgroup v1 pids controller (hybrid hosts)


@dataclass(frozen=True)
class CgroupHome:
    """Where this process creates its workers' cgroups, and what they can do there."""

    path: Path  # the v2 directory holding one cgroup per worker
    kill_file: bool  # cgroup.kill exists (Linux >= 5.14); else freeze, then SIGKILL each member
    pids_v2: bool  # pids.max can be set in a worker's v2 cgroup
    pids_v1: Path | None  # else the v1 pids hierarchy, when this process may write it (root)
    note: str  # why there is no process limit, '' when there is one


@dataclass(frozen=True)
class Unavailable:
    """cgroup v2 cannot contain workers here, and why (one line)."""

    reason: str


def _v2_mounts() -> list[tuple[str, str]]:
    """(mount point, root of the mount inside the hierarchy) of every cgroup2 mount."""
    mounts = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                pre, _, post = line.partition(" - ")
                if post.split()[:1] == ["cgroup2"]:
                    fields = pre.split()
                    mounts.append((_unescape(fields[4]), _unescape(fields[3])))
    except OSError:
        pass
    return mounts


def _unescape(path: str) -> str:
    return path.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def own_cgroup() -> Path | Unavailable:
    """This process's cgroup v2 directory."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError as e:
        return Unavailable(f"cannot read /proc/self/cgroup: {e.strerror}")
    path = next((line[3:] for line in lines if line.startswith("0::")), None)
    mounts = _v2_mounts()
    if path is None or not mounts:
        return Unavailable("no cgroup v2 hierarchy mounted")
    for mount, root in mounts:
        rel = path[len(root):] if root != "/" and path.startswith(root) else path
        d = Path(mount) / rel.lstrip("/")
        if (d / "cgroup.procs").exists():
            return d
    return Unavailable(f"this process's cgroup {path} is not visible under {mounts[0][0]}")


def _joins(home: Path) -> str:
    """Whether a fresh process can be moved into a cgroup under `home` ('' if so, else why)."""
    probe = home / f"probe-{os.getpid()}-{time.monotonic_ns()}"
    try:
        probe.mkdir()
        r = subprocess.run(["/bin/sh", "-c", 'echo $$ > "$0"', str(probe / "cgroup.procs")],
                           capture_output=True, text=True, timeout=30)
        return "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1][:160]
    except OSError as e:
        return e.strerror or type(e).__name__
    except subprocess.TimeoutExpired:
        return "a shell did not start within 30 s"
    finally:
        _rmdir(probe)


def _pids_v2(home: Path) -> str:
    """Turn on the pids controller for the workers' cgroups ('' when on, else why not)."""
    try:
        if "pids" not in (home / "cgroup.controllers").read_text().split():
            # Turning it on in the parent would need the parent to hold no processes (cgroup v2's
            # "no internal processes" rule): that means moving processes kevolve does not own.
            return f"the pids controller is not delegated to {home.parent}"
        (home / "cgroup.subtree_control").write_text("+pids")
        return ""
    except OSError as e:
        return f"cannot enable pids in {home}: {e.strerror}"


@functools.cache
def home() -> CgroupHome | Unavailable:
    """Probe once per process whether (and where) workers can get cgroups of their own."""
    own = own_cgroup()
    if isinstance(own, Unavailable):
        return own
    path = own / SLICE
    try:
        path.mkdir(exist_ok=True)
    except OSError as e:
        return Unavailable(f"cgroup v2 not writable: {own}: {e.strerror}")
    try:  # a slice another user made (root's, before) reads as EACCES to this one: not delegated, not an error
        kill_file = (path / "cgroup.kill").exists()
        freeze_file = (path / "cgroup.freeze").exists()
    except OSError as e:
        return Unavailable(f"cgroup v2 not readable: {path}: {e.strerror}")
    if not kill_file and not freeze_file:
        return Unavailable("this kernel has neither cgroup.kill (5.14) nor cgroup.freeze (5.2)")
    why = _joins(path)
    if why:
        return Unavailable(f"cannot move a process into {path}: {why}")
    note = _pids_v2(path)
    v1 = None
    if note and os.geteuid() == 0 and os.access(_V1_PIDS, os.W_OK) and (_V1_PIDS / "cgroup.procs").exists():
        v1 = _V1_PIDS
        sweep(v1)
    sweep(path)
    return CgroupHome(path, kill_file, pids_v2=not note, pids_v1=v1, note="" if v1 else note)


@functools.cache
def _start_of(pid: int) -> int:
    """This process's start time, by pid: a forked child owns its cgroups under its own name."""
    me = procfs.read_stat(pid)
    return me.start if me else 0


class WorkerCgroup:
    """The cgroup(s) of one worker: created now, joined by the worker's first process."""

    def __init__(self, home: CgroupHome, token: str, pids_limit: int | None) -> None:
        name = f"w-{os.getpid()}-{_start_of(os.getpid())}-{token}"
        self.v2 = home.path / name
        self.v1 = home.pids_v1 / name if home.pids_v1 is not None and pids_limit else None
        self.kill_file = home.kill_file
        try:
            self.v2.mkdir()
        except FileNotFoundError:  # the shared slice was removed meanwhile (it is empty between runs)
            home.path.mkdir(exist_ok=True)
            if home.pids_v2:
                (home.path / "cgroup.subtree_control").write_text("+pids")
            self.v2.mkdir()
        try:
            if pids_limit and home.pids_v2:
                (self.v2 / "pids.max").write_text(str(pids_limit))
            if self.v1 is not None:
                self.v1.mkdir(exist_ok=True)
                (self.v1 / "pids.max").write_text(str(pids_limit))
        except OSError:
            self.remove()
            raise

    def join_prefix(self) -> list[str]:
        """argv that puts its own process into the cgroup(s), then execs the rest of the argv."""
        files = [self.v2 / "cgroup.procs"] + ([self.v1 / "cgroup.procs"] if self.v1 else [])
        join = " && ".join(f"echo $$ > {shlex.quote(str(f))}" for f in files)
        return ["/bin/sh", "-c", f'{join} && exec "$@"', "sh"]

    def kill(self, limit_s: float = 10.0) -> bool:
        """Kill every process in the cgroup and remove it; False if something outlived `limit_s`."""
        empty = kill_cgroup(self.v2, self.kill_file, limit_s)
        if empty:
            self.remove()
        return empty

    def remove(self) -> None:
        for d in (self.v2, self.v1):
            if d is not None:
                _rmdir(d)


def _members(path: Path) -> list[int]:
    try:
        return [int(x) for x in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def kill_cgroup(path: Path, kill_file: bool, limit_s: float = 10.0) -> bool:
    """SIGKILL everything in a v2 cgroup until it is empty (True), or `limit_s` passed (False)."""
    deadline = time.monotonic() + limit_s
    frozen = False
    while True:
        pids = _members(path)
        if not pids:
            return True
        if time.monotonic() > deadline:
            return False
        try:
            if kill_file:
                (path / "cgroup.kill").write_text("1")
            else:
                # Frozen members cannot fork or exit, so their pids stay theirs while we signal.
                if not frozen:
                    (path / "cgroup.freeze").write_text("1")
                    frozen = True
                    continue  # re-read the members once frozen
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        except FileNotFoundError:
            return True  # removed meanwhile
        time.sleep(0.005)


def _rmdir(path: Path) -> None:
    for _ in range(50):  # the kernel empties a cgroup a moment after its last member died
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
    log.warning("could not remove cgroup %s", path)


def sweep(directory: Path) -> int:
    """Kill and remove the worker cgroups of orchestrators that are gone; returns how many.

    An orchestrator killed outright (SIGKILL, OOM) cannot clean up: whatever its workers left in
    their cgroups is found here by the next one. Cgroups of live orchestrators are left alone.
    """
    removed = 0
    for d in directory.glob("w-*-*-*"):
        try:
            _, pid, start, _token = d.name.split("-", 3)
            owner = procfs.read_stat(int(pid))
        except ValueError:
            continue
        if owner is not None and owner.start == int(start):
            continue
        if (d / "cgroup.kill").exists() or (d / "cgroup.freeze").exists():
            kill_cgroup(d, (d / "cgroup.kill").exists(), 5.0)
        _rmdir(d)
        removed += not d.exists()
    for d in directory.glob("kevolve-*"):
        # pids cgroups of earlier versions (bwrap.py): one made a moment ago is still empty until its
        # worker's shell joins it, so only old ones go (rmdir fails on a live one, which is fine).
        try:
            if time.time() - d.stat().st_mtime >= 120:
                d.rmdir()
        except OSError:
            pass
    return removed


__all__ = ["CgroupHome", "SLICE", "Unavailable", "WorkerCgroup", "home", "kill_cgroup", "own_cgroup", "sweep"]
