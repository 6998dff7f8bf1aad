"""How much memory this machine gives an evaluation, and how a death by the kernel's OOM killer shows.

Light (no torch): read by `SandboxConfig` for its default and by the parent, the judge and the
runner watchers. Everything here reads /proc and /sys only; where a file cannot be read the answer
is None and callers fall back to what they did before.
"""

from __future__ import annotations

import functools
from pathlib import Path

GIB = 2**30
# One evaluation lane runs three processes at once (the judge, the reference runner, the candidate
# runner); they rarely all peak together, so each may use half of what the machine had available, but
# at least COMPILE_GB where that much is there: a runner building a C++ extension needs it for the compiler.
SHARE, COMPILE_GB = 0.5, 2.0
MIN_LIMIT_GB = 0.5


def _meminfo() -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                out[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return out


def _limit_room(folder: Path, limit_file: str, usage_file: str) -> int | None:
    try:
        limit = (folder / limit_file).read_text().strip()
        usage = int((folder / usage_file).read_text().strip())
    except (OSError, ValueError):
        return None
    if limit.isdigit() and int(limit) < 2**60:  # "max", or v1's huge number: no limit here
        return max(0, int(limit) - usage)
    return None


def _cgroup_headroom() -> int | None:
    """What this process's cgroups still allow: limit - usage, the tightest over its ancestors (v2 or v1)."""
    root = Path("/sys/fs/cgroup")
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    rooms: list[int] = []
    for line in lines:
        _n, controllers, rel = line.split(":", 2)
        if controllers == "":
            top, files = root, ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            top, files = root / "memory", ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        folder = top / rel.strip().lstrip("/")
        while True:
            room = _limit_room(folder, *files)
            rooms += [] if room is None else [room]
            if folder == top or top not in folder.parents:
                break
            folder = folder.parent
    return min(rooms) if rooms else None


def available_bytes() -> int | None:
    """Memory this process could still get: MemAvailable, capped by its cgroup's limit. None if unknown."""
    avail = _meminfo().get("MemAvailable")
    room = _cgroup_headroom()
    known = [x for x in (avail, room) if x is not None]
    return min(known) if known else None


@functools.cache
def default_limit_gb() -> float:
    """The default per-process memory limit (SandboxConfig.memory_limit_gb): half of what this machine
    had available when kevolve started, at least COMPILE_GB (or 90 % of what is available, if less), at
    least MIN_LIMIT_GB. 32 GB where the machine's memory cannot be read."""
    avail = available_bytes()
    if avail is None:
        return 32.0
    gb = avail / GIB
    return max(MIN_LIMIT_GB, round(max(SHARE * gb, min(COMPILE_GB, 0.9 * gb)), 1))


def oom_kills() -> int | None:
    """The kernel's count of processes its OOM killer has ended (/proc/vmstat oom_kill), or None."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def peak_rss_bytes(pid: int) -> int | None:
    """The highest resident set size a live process has had (VmHWM), or None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def oom_killed(returncode: int | None, oom_before: int | None) -> bool:
    """Did the kernel's OOM killer end a process? It dies by SIGKILL, which kevolve did not send, and
    the kernel's OOM-kill count went up meanwhile."""
    if returncode != -9 or oom_before is None:
        return False
    now = oom_kills()
    return now is not None and now > oom_before


def gib(n: int | float | None) -> str:
    """Bytes as '12.3 GiB' or '96 MiB' ('?' when unknown)."""
    if n is None:
        return "?"
    return f"{n / GIB:.1f} GiB" if n >= GIB / 2 else f"{n / 2**20:.0f} MiB"


def oom_reason(who: str, peak: int | None, limit_gb: float) -> str:
    """The `memory_limit:` reason of a process the OOM killer ended, with the memory it reached and the limit."""
    avail = available_bytes()
    return (f"memory_limit: the kernel's out-of-memory killer ended {who} at {gib(peak)} resident or more "
            f"(kevolve's limit {limit_gb:.1f} GiB per process, --memory-limit-gb; {gib(avail)} available now)")


__all__ = ["GIB", "available_bytes", "default_limit_gb", "gib", "oom_killed", "oom_kills", "oom_reason",
           "peak_rss_bytes"]
