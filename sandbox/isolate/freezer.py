"""Freezing the cgroup another process is in (a container's), cgroup v1's freezer or v2's cgroup.freeze.

Local runners freeze their own cgroup (containment.CgroupContainment). A container runner's process is the
Docker client; the container's processes are in a cgroup Docker made, found from its init's /proc/PID/cgroup:
`N:freezer:/docker/ID` (v1, freezer.state FROZEN/THAWED) or `0::/…` (v2, cgroup.freeze 1/0). The judge runs
as the user who can write there (root, as Docker needs) or not at all: then `of` gives None.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from kevolve.sandbox.isolate.cgroups import _v2_mounts


@dataclass(frozen=True)
class Freezer:
    """One cgroup's freeze switch: the file, what freezes and thaws it, and where it says it is frozen."""

    control: Path
    on: str
    off: str
    state: Path
    frozen: str

    def freeze(self, on: bool, wait_s: float = 0.1) -> bool:
        """Freeze (or thaw) every process in the cgroup; waits up to `wait_s` for the kernel to report it
        frozen. False where the file cannot be written (the cgroup is gone)."""
        try:
            self.control.write_text(self.on if on else self.off)
            if on:
                deadline = time.monotonic() + wait_s
                while self.frozen not in self.state.read_text():
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.0002)
            return True
        except OSError:
            return False


def of(pid: int, root: Path = Path("/sys/fs/cgroup")) -> Freezer | None:
    """The freeze switch of `pid`'s cgroup, or None where there is none this process may write."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "freezer" in controllers.split(","):
            d = root / "freezer" / path.lstrip("/")
            f = Freezer(d / "freezer.state", "FROZEN", "THAWED", d / "freezer.state", "FROZEN")
            return f if _writable(f.control) else None
    for line in lines:
        hier, _, path = line.split(":", 2)
        if hier == "0" and path not in ("", "/"):
            for mount, mroot in _v2_mounts():
                rel = Path(path).relative_to(mroot) if Path(path).is_relative_to(mroot) else None
                if rel is not None and (d := Path(mount) / rel).is_dir():
                    f = Freezer(d / "cgroup.freeze", "1", "0", d / "cgroup.events", "frozen 1")
                    return f if _writable(f.control) else None
    return None


def _writable(p: Path) -> bool:
    import os

    return p.exists() and os.access(p, os.W_OK)


__all__ = ["Freezer", "of"]
