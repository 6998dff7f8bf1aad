"""The shared build cache's trust rule (runs on the host side: the judge and the launcher, never in a runner).

A sandboxed candidate's builds go to a private build directory and the host copies them into the cache
afterwards, under the candidate's *scope* (a hash of its whole source): so a candidate can only ever fill the
cache entries that the very same source will load, never plant a module that another candidate would import.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path


def build_scope(candidate_source: str) -> str:
    """The cache namespace of one candidate source: its builds are only ever loaded by the same text."""
    return hashlib.sha256(candidate_source.encode()).hexdigest()[:20]


# One source's builds at most this (an honest extension's folder, objects and .so, is tens of MB; red team 8 left a
# 538 MB .so of a static array in the cache), and the extensions all together at most CACHE_MAX: past it the scopes
# least recently added to go, oldest first (nothing evicted them before: every proposal's variant added its own).
SCOPE_MAX, CACHE_MAX = 512 * 2**20, 16 * 2**30


def promote(built: Path, cache_dir: Path, scope: str, max_bytes: int = SCOPE_MAX) -> bool:
    """Host side, after a worker finished: copy its builds into the cache under its scope.

    One extension (a folder under the scope: `kx_<hash>/…`) at a time, first writer wins: an extension
    already in the cache is never replaced, and one the scope lacks is added even when the scope holds
    others (the same source built by another recipe version or with other flags: before 2026-11-27 a scope
    that existed at all took nothing more, so every `eval` after a recipe change rebuilt, 20-23 s each on the
    CPU). Only plain files and directories are copied (a symlink the candidate planted is dropped); each
    folder is renamed into place whole, so a reader never sees half of it. Returns whether anything was added.
    """
    src, dst = built / "extensions" / scope, cache_dir / "extensions" / scope
    if not scope or not src.is_dir() or src.is_symlink():
        return False
    budget, added = max_bytes, False
    for ext in sorted(src.iterdir()):
        if ext.is_symlink() or not ext.is_dir() or (dst / ext.name).exists():
            continue
        files = [Path(root, n) for root, _dirs, names in os.walk(ext) for n in names]  # links not followed
        files = [f for f in files if f.is_file() and not f.is_symlink()]
        size = sum(f.stat().st_size for f in files)
        if not files or size > budget:
            continue
        budget -= size
        added |= _copy_into_place(ext, files, dst / ext.name)
    if added:
        os.utime(dst)
        evict(cache_dir / "extensions", CACHE_MAX, keep=scope)
    return added


def evict(root: Path, max_bytes: int, keep: str = "") -> list[str]:
    """Remove whole scopes, those least recently added to first, until the folder holds at most `max_bytes`
    (never `keep`). A scope goes by a rename first, so a reader sees it whole or not at all (then builds again).
    Returns the scopes removed."""
    scopes = []
    for d in root.iterdir() if root.is_dir() else ():
        if d.is_dir() and not d.is_symlink() and not d.name.startswith("."):
            size = sum(Path(r, n).stat().st_size for r, _ds, ns in os.walk(d) for n in ns
                       if not Path(r, n).is_symlink())
            scopes.append((d.stat().st_mtime, d.name, size))
    total, gone = sum(s for _t, _n, s in scopes), []
    for _t, name, size in sorted(scopes):
        if total <= max_bytes:
            break
        if name == keep:
            continue
        tomb = root / f".evicted-{name}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(root / name, tomb)
        except OSError:
            continue
        shutil.rmtree(tomb, ignore_errors=True)
        total, gone = total - size, gone + [name]
    return gone


def _copy_into_place(src: Path, files: list[Path], dst: Path) -> bool:
    tmp = dst.parent / f".{dst.name}.{uuid.uuid4().hex}"
    try:
        for f in files:
            target = tmp / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target, follow_symlinks=False)
        os.rename(tmp, dst)  # fails if another worker's copy landed first: theirs stands
        return True
    except OSError:
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["CACHE_MAX", "SCOPE_MAX", "build_scope", "evict", "promote"]
