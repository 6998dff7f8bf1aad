"""Bytecode for the runners: compiled once by trusted code, read (never written) by every runner.

A runner starts with PYTHONDONTWRITEBYTECODE=1 (isolation.scrubbed_env), so where the Python
installation holds no `__pycache__` (a read-only or `--no-compile` install, a Docker image built with
PYTHONDONTWRITEBYTECODE: the lent H100's torch is one) every runner compiled torch's sources again:
`builtins.compile` took 4 s of the profiler's 6.3 s warm-up there, and a runner's warm start was
11.5 s (torch's import 6.1 s, the profiler 5.2 s) — two spare runners could not keep up with 1-2 s
evaluations. On a CPU machine without bytecode: 5.5 s a start, 2.1 s with it.

`prime(root)` runs the runner's own imports (and the profiler's first use, on the CPU) once, in a
fresh process that runs no candidate code, with PYTHONPYCACHEPREFIX pointing at
ROOT/pycache/<cache tag>-<stamp of the interpreter, torch and kevolve> and writing allowed; a marker
file there holds a digest of what it wrote. `env()` then gives runners that prefix, still with PYTHONDONTWRITEBYTECODE=1;
bubblewrap binds it read-only (bwrap.py). Python checks each .pyc against its source's size and
mtime, so a changed installation is compiled again in the runner (and not written), never misread.

With isolation none a candidate runs as the user and can write there (as anywhere else the user can):
a corrupted or crafted .pyc would reach every runner after it, and every later run. So the marker holds
a digest of the whole prefix's contents, which `prime` checks (a changed prefix is removed and primed
again), and after each candidate whose runner had no sandbox the judge compares every file's inode, size
and change time with what they were when primed (`changed()`, a few ms): changed, that candidate is
rejected for tampering and the prefix is primed again before the next runner starts.

Which candidate to blame: the prefix was one per installation, shared by every judge of the user, so a
candidate that wrote it in one judge (or a judge priming it again after that) got an honest candidate
evaluated at the same time in another judge rejected for the write (the adversarial suite under `none`
on two workers: 12 honest and unrelated candidates "wrote the runner bytecode"). Every judge the parent
starts therefore takes up its own copy (`prime(root, private=DIR)`, judge/runner_proc.py): copied from the
shared prefix and checked against its marker's digest, so a copy of a written prefix is never taken up
(the shared prefix is primed again, under a lock that judges of the same user take, then copied again).
What its candidates can write is then its own copy, and `changed()` blames only what ran in that judge.
A candidate with no sandbox that seeks out another judge's copy still can write it: then that judge's
candidate is the one rejected (isolation none has no wall between the user's processes; Landlock and
bubblewrap take the write away, docs/VERIFICATION.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

VAR = "PYTHONPYCACHEPREFIX"
ROOT_VAR = "KEVOLVE_PYCACHE_ROOT"  # set by the parent for its judges (whose HOME is their scratch)
_ACTIVE: Path | None = None  # the primed prefix this process hands to the runners it starts

# What sandbox/runner/serve.py's main() imports before it reports warm, and the profiler's first use.
PRIME = """
import torch, torch.utils.cpp_extension
from kevolve.sandbox.runner import serve as runner, integrity, step, ablation, torch_settings as settings
from kevolve.sandbox.common import harness, channel, protocol, timing, transport, cuda_rt
from kevolve.sandbox.build import cache, compile
from kevolve.sandbox.common.profile import warm_up
warm_up(torch.device("cpu"))
runner.preimport()
"""


def _stamp() -> str:
    """Without importing torch (the judge primes before it imports torch: judge/boot.py)."""
    import importlib.util
    from importlib import metadata

    import kevolve

    spec = importlib.util.find_spec("torch")
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        version = ""
    parts = (sys.version, sys.executable, version, str(Path(spec.origin).parent) if spec and spec.origin else "",
             getattr(kevolve, "__version__", ""), str(Path(__file__).parent), PRIME)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def default_root() -> Path:
    """Where primed bytecode lives: the user's cache (XDG_CACHE_HOME or ~/.cache)/kevolve, shared by
    every run and test of this user whatever its --cache-dir."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kevolve"


def folder(root: Path) -> Path:
    """One folder per interpreter, torch and kevolve installation (several share a user's cache, and a
    digest over a folder that another one also primes into would never match)."""
    return Path(root).resolve() / "pycache" / f"{sys.implementation.cache_tag}-{_stamp()}"


def digest(where: Path) -> str:
    """A hash of every bytecode file under `where`, paths and contents. A symbolic link counts as one, never
    followed: priming makes none, and a folder linked to elsewhere (planted in the shared prefix, its contents
    the same as primed) would carry later writes there into a copy that `stamps` does not follow."""
    h = hashlib.blake2b(digest_size=16)
    rows: list[tuple[Path, bool]] = []
    for top, dirs, files in os.walk(where):
        for name in (*dirs, *files):
            p = Path(top) / name
            if p.is_symlink():
                rows.append((p, True))
            elif name in files and name.endswith(".pyc"):
                rows.append((p, False))
    for p, link in sorted(rows):
        h.update(str(p.relative_to(where)).encode() + b"\0")
        if link:
            h.update(b"\2symlink")
            continue
        try:
            h.update(p.read_bytes())
        except OSError:
            h.update(b"\1unreadable")
    return h.hexdigest()


def stamps(where: Path) -> str:
    """What `changed()` compares, cheaply (a few ms): every file's path, inode, size and change time. A
    write, a replacement, a new file or a timestamp put back (os.utime sets the change time to now)
    all show; a user cannot set a change time."""
    rows = []
    for top, _dirs, _files in os.walk(where):
        with os.scandir(top) as it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                rows.append(f"{e.path}\0{st.st_ino}\0{st.st_size}\0{st.st_ctime_ns}\n")
    return hashlib.blake2b("".join(sorted(rows)).encode(), digest_size=16).hexdigest()


_DIGEST: str | None = None  # the active prefix's stamps, as primed
_FROM: tuple[Path, Path | None] | None = None  # prime()'s root and private folder for the active prefix


@contextlib.contextmanager
def _locked(where: Path, exclusive: bool) -> Iterator[None]:
    """Judges of the same user prime (exclusive) and copy (shared) the prefix one at a time: two judges that
    found it written both removed and primed it, and a judge copying it read a half-primed one."""
    where.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(where.parent / f"{where.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def _prime_shared(where: Path, timeout_s: float) -> bool:
    """The shared prefix, primed now if its marker is missing or it no longer matches the marker's digest."""
    marker = where / ".primed"
    with _locked(where, exclusive=True):
        if marker.exists() and marker.read_text().strip() != digest(where):
            log.warning("runner bytecode under %s changed since it was primed: primed again", where)
            shutil.rmtree(where, ignore_errors=True)
        if marker.exists():
            return True
        where.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env[VAR] = str(where)
        try:
            done = subprocess.run([sys.executable, "-P", "-c", PRIME], env=env, cwd=where, timeout=timeout_s,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        except (OSError, subprocess.TimeoutExpired) as e:
            log.warning("runner bytecode not primed (%s): runners compile their sources", e)
            return False
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["?"])[-1]
            log.warning("runner bytecode not primed (%s): runners compile their sources", last[:200])
            return False
        marker.write_text(digest(where))
        return True


def _copy(where: Path, private: Path) -> Path | None:
    """A copy of the shared prefix in `private`, taken up only if its contents match the digest the shared marker
    holds (a candidate elsewhere may be writing the shared one as it is read); else None."""
    dest = Path(private).resolve() / where.name
    shutil.rmtree(dest, ignore_errors=True)
    try:
        with _locked(where, exclusive=False):
            want = (where / ".primed").read_text().strip()
            shutil.copytree(where, dest, symlinks=True)
    except OSError as e:
        log.warning("runner bytecode not copied (%s)", e)
        shutil.rmtree(dest, ignore_errors=True)
        return None
    if digest(dest) == want:
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    return None


def prime(root: Path, timeout_s: float = 300.0, private: Path | None = None) -> Path | None:
    """The prefix this process's runners read: the shared one under `root` (made now if its marker is missing or
    the prefix no longer matches the digest the marker holds), or, with `private`, this judge's own copy of it in
    that folder. None where priming failed (runners then compile their sources as before; logged)."""
    global _ACTIVE, _DIGEST, _FROM
    where = folder(root)
    took: Path | None = None
    for attempt in range(2):  # a copy that does not match: the shared prefix was written; primed again, copied again
        # a copy is checked against the marker's digest itself: the shared prefix's own check (0.12 s) only after
        # a copy that did not match
        if (private is None or attempt or not (where / ".primed").exists()) and not _prime_shared(where, timeout_s):
            return None
        took = where if private is None else _copy(where, private)
        if took is not None:
            break
    if took is None:
        log.warning("runner bytecode under %s kept changing while it was copied: runners compile their sources",
                    where)
        return None
    _ACTIVE, _DIGEST, _FROM = took, stamps(took), (Path(root), private)
    _sweep(where)
    return took


STALE_S = 14 * 86400  # a prefix no judge has taken up for this long is removed (60 MB each on the CPU)


def _sweep(where: Path) -> None:
    """Mark `where` used now and remove the sibling prefixes of other installations unused for STALE_S.

    The mark is a file beside the prefix, not in it: `stamps` would see a touched marker inside as a write. A
    prefix with no mark (primed before marks existed) counts from its marker's time."""
    used = where.parent / f"{where.name}.used"
    try:
        used.touch()
    except OSError:
        return
    now = used.stat().st_mtime
    for d in where.parent.iterdir():
        if not d.is_dir() or d == where:
            continue
        mark = d.parent / f"{d.name}.used"
        try:
            last = (mark if mark.exists() else d / ".primed" if (d / ".primed").exists() else d).stat().st_mtime
        except OSError:
            continue
        if now - last > STALE_S:
            shutil.rmtree(d, ignore_errors=True)
            mark.unlink(missing_ok=True)
            log.info("removed runner bytecode %s, unused for %.0f days", d, (now - last) / 86400)


def changed() -> bool:
    """Whether the active prefix differs from what was primed (then it is primed or copied again at once)."""
    global _ACTIVE, _DIGEST
    if _ACTIVE is None or _DIGEST is None or stamps(_ACTIVE) == _DIGEST:
        return False
    where, (root, private) = _ACTIVE, _FROM or (_ACTIVE.parent.parent, None)
    _ACTIVE = _DIGEST = None
    shutil.rmtree(where, ignore_errors=True)
    prime(root, private=private)  # its own copy: copied again (the shared prefix primed again first if written too)
    return True


def active() -> Path | None:
    """The prefix runners started from this process read, if one was primed."""
    return _ACTIVE


def env() -> dict[str, str]:
    """Variables for a runner's environment: the primed prefix, read only (nothing where none)."""
    return {VAR: str(_ACTIVE), "PYTHONDONTWRITEBYTECODE": "1"} if _ACTIVE is not None else {}


__all__ = ["PRIME", "ROOT_VAR", "VAR", "active", "changed", "default_root", "digest", "env", "folder", "prime", "stamps"]
