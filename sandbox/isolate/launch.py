"""Spawn a worker process in its own process group, scratch dir, scrubbed environment and containment.

A worker runs exactly one job and exits. `WorkerProcess.start()` may be called ahead of time (a warm
spare: torch imported, device initialised) so that its start-up overlaps earlier work. `kill()`
leaves nothing the worker started running (sandbox/isolate/containment.py), also at this process's exit.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable, Iterator
from typing import Protocol

from kevolve.languages import compile_caches
from kevolve.sandbox.isolate import pycache
from kevolve.sandbox.isolate.containment import Containment, ContainmentKind, contain
from kevolve.sandbox.common.protocol import WorkerReport, WorkerRequest

log = logging.getLogger(__name__)


class Launcher(Protocol):
    """Turns the worker's argv into the one actually spawned (e.g. under bubblewrap, sandbox/isolate/bwrap.py)."""

    shell_exit_codes: bool  # the wrapper reports the worker's death by signal N as exit code 128+N

    def argv(self, worker_argv: list[str], scratch: Path) -> list[str]: ...

_SECRET_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)
_CLOUD_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_", "GCLOUD_", "GCP_", "CLOUDSDK_", "ARM_", "KEVOLVE_",
                   "DATABASE_URL", "PG", "HF_", "HUGGING", "OPENAI", "ANTHROPIC", "GITHUB_", "SSH_")


def is_secret(name: str) -> bool:
    """A variable a runner never sees: a secret, a cloud credential, kevolve's own state."""
    return bool(_SECRET_RE.search(name)) or name.upper().startswith(_CLOUD_PREFIXES)


# What a runner, the judge and a build keep of the user's environment: these names alone, whatever the others are
# called. A list of secret-looking names let credentials through under names it did not know (red team 7: PIP_INDEX_URL
# and HTTPS_PROXY with a password in the address, SENTRY_DSN, REDIS_URL, read by plain Python under the default policy
# and either isolation).
_KEEP = frozenset(("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "SHELL", "LD_LIBRARY_PATH", "CC", "CXX",
                   "CPATH", "LIBRARY_PATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "VIRTUAL_ENV", "CONDA_PREFIX",
                   "MAX_JOBS", "SOURCE_DATE_EPOCH", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CERT_PATH",
                   "DOCKER_TLS_VERIFY"))
_KEEP_PREFIXES = ("LC_", "PYTHON", "CUDA_", "NVIDIA_", "NVCC_", "CUDNN_", "CUBLAS_", "NCCL_", "OMP_", "KMP_", "GOMP_",
                  "MKL_", "OPENBLAS_", "TORCH_", "PYTORCH_", "CUPY_", "TRITON_")
_URL_LOGIN = re.compile(r"://[^/@\s]*:[^/@\s]*@")  # scheme://user:password@host


def kept(name: str, value: str) -> bool:
    """Whether a variable of the user's environment reaches a runner: a name of the list above, not a secret's, and
    no login in its value."""
    return (name in _KEEP or name.startswith(_KEEP_PREFIXES)) and not is_secret(name) and not _URL_LOGIN.search(value)


def is_private(name: str) -> bool:
    """A variable of this process's environment that no runner gets (procfs.hide_environ hides its value)."""
    return not kept(name, os.environ.get(name, ""))


def scrubbed_env(device: str, scratch: Path) -> dict[str, str]:
    """The parent's environment as far as `kept` keeps it, and the runner's own folders and settings."""
    env = {k: v for k, v in os.environ.items() if kept(k, v)}
    env.update(HOME=str(scratch), TMPDIR=str(scratch), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    env.update(_cache_dirs(scratch))
    env.update(pycache.env())  # primed bytecode, read only (sandbox/isolate/pycache.py)
    # Keep freed host blocks in the heap so that the harness's poisoned buffers are what an
    # unwritten output receives (see integrity.poison_allocator).
    env.update(MALLOC_MMAP_THRESHOLD_="33554432", MALLOC_TRIM_THRESHOLD_="268435456")
    if device.startswith("cuda:"):
        env["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]
    if device == "cpu":
        # One intra-op thread for reference and candidate alike: on a loaded machine OpenMP's
        # barriers made eager ReLU 25x slower than on an idle one, while a single-threaded C++
        # candidate was unaffected — a speedup the kernel did not earn.
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _cache_dirs(scratch: Path) -> dict[str, str]:
    """Every compile cache in the private scratch: under bubblewrap or in a container the rest of the
    file system is read-only, and outside them a cache shared between candidates is a channel
    between them. (HOME is scratch too, which covers ~/.cupy, ~/.triton, ~/.nv and ~/.cache;
    these hold even where a library reads its own variable first.)"""
    return {**{var: str(scratch / sub) for var, sub in compile_caches()},  # the kernel languages' (languages.py)
            "TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor"), "CUDA_CACHE_PATH": str(scratch / "nv"),
            "XDG_CACHE_HOME": str(scratch / "cache")}


def cache_vars() -> tuple[str, ...]:
    """The environment variables that place a compile cache (one list: the container keeps exactly these)."""
    return tuple(_cache_dirs(Path("/scratch")))


@dataclass(frozen=True)
class WorkerExit:
    """How a worker job ended, as seen from outside the process."""

    report: WorkerReport | None
    returncode: int | None
    timed_out: bool
    memory_exceeded: bool
    elapsed_s: float
    log_tail: str
    phase: str
    disk_exceeded: bool = False


def _group_stats(pgid: int) -> Iterator[tuple[int, list[str]]]:
    """(pid, /proc/pid/stat fields after the comm) of every process in the group."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:  # field 5 (pgrp)
                yield int(pid), fields
        except (OSError, IndexError, ValueError):
            continue


def _rss_bytes(pgid: int) -> int:
    """Resident memory of every process in the group (Linux /proc)."""
    page = os.sysconf("SC_PAGE_SIZE")
    return sum(int(fields[21]) * page for _pid, fields in _group_stats(pgid))  # field 24 (rss pages)


def _pss_bytes(pgid: int) -> int | None:
    """Proportional set size of the group: a page shared by n processes counts 1/n in each.

    RSS counts a forked child's copy-on-write pages again in every child, so a few hundred forks
    of a 300 MB Python process "use" 100 GB by RSS while the machine's memory barely moves. None when
    a process's smaps cannot be read (then RSS stands).
    """
    total = 0
    for pid, _fields in _group_stats(pgid):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue  # exited meanwhile (ESRCH while it is being reaped)
        except OSError:
            return None  # not ours to read: RSS stands
    return total


def _over_memory(pgid: int, limit: int) -> bool:
    """RSS first (cheap, an upper bound); only above the limit is the shared-page-aware PSS read."""
    if _rss_bytes(pgid) <= limit:
        return False
    pss = _pss_bytes(pgid)
    return pss is None or pss > limit


def _unlinked_bytes(pgid: int) -> int:
    """Bytes of removed files the group still holds open or mapped: in no folder, so `_dir_bytes` misses them, and
    in nobody's RSS until mapped and touched, yet on /dev/shm they are RAM (red team 7: 1.5 GB held through an
    unlinked file under both isolations, the verdict `ok`)."""
    return unlinked_bytes_of(pid for pid, _fields in _group_stats(pgid))


def unlinked_bytes_of(pids: Iterable[int]) -> int:
    """Bytes of removed files these processes hold open or mapped, each file counted once; what cannot be read
    (another user's process, map_files without CAP_SYS_ADMIN) is left out."""
    seen: dict[tuple[int, int], int] = {}
    for pid in pids:
        links: list[str] = []
        try:
            links += [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            pass
        try:
            with open(f"/proc/{pid}/maps") as f:  # mapped, its descriptor closed: the mapping keeps it
                links += [f"/proc/{pid}/map_files/{line.split(None, 1)[0]}" for line in f
                          if line.endswith(" (deleted)\n")]
        except OSError:
            pass
        for link in links:
            try:
                st = os.stat(link)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 0:
                seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return sum(seen.values())


def over_scratch(scratch: Path, pgid: int, limit: int) -> bool:
    """The scratch folder's files and the group's removed-but-held ones over `limit` (the latter only read when
    the folder alone is under it)."""
    used = _dir_bytes(scratch)
    return used > limit or used + _unlinked_bytes(pgid) > limit


def _dir_bytes(path: Path) -> int:
    """Bytes under path (files only; symlinks not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


# A worker importing torch can take a minute on a loaded 2-core machine; the job's timeout starts
# once it is ready, and a worker that never gets ready is given up on after this long.
_STARTUP_LIMIT_S = 300.0


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def default_scratch_root() -> Path | None:
    """/dev/shm when it has room: outputs cross the process boundary as files, RAM is faster."""
    shm = Path("/dev/shm")
    try:
        if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 8 * 2**30:
            return shm
    except OSError:
        pass
    return None


class WorkerProcess:
    """One single-use worker: start() spawns it warm, run() gives it its job and waits."""

    module = "kevolve.sandbox.runner.serve"  # what `python -m` runs in the worker

    def __init__(self, device: str, root: Path | None = None, launcher: Launcher | None = None,
                 scratch_limit_gb: float | None = None, containment: ContainmentKind | None = None) -> None:
        self.device = device
        self.scratch = Path(tempfile.mkdtemp(prefix="kevolve-", dir=root or default_scratch_root()))
        self.proc: subprocess.Popen[bytes] | None = None
        self.launcher = launcher
        self.scratch_limit = int(scratch_limit_gb * 2**30) if scratch_limit_gb else None
        # Where the worker builds extensions when the shared cache is read-only to it (its scratch's
        # build/ as the worker sees it), and the host cache those builds are promoted into.
        self.build_path: str | None = getattr(launcher, "build_path", None)
        self.host_cache: Path | None = getattr(launcher, "cache", None)
        self.containment_kind = containment  # None: the best this machine offers
        self.containment: Containment | None = None
        self._kill_lock = threading.Lock()  # run()'s limit watcher and its caller may both kill

    def start(self) -> WorkerProcess:
        """Spawn the sandbox's worker; it imports torch and waits for its job."""
        return self.spawn([sys.executable, "-m", self.module, self.device])

    def spawn(self, worker_argv: list[str], pass_fds: tuple[int, ...] = ()) -> WorkerProcess:
        """Spawn `worker_argv` as this worker: under the launcher, in a containment of its own
        (`pass_fds`: descriptors the worker inherits, under the same numbers)."""
        env = scrubbed_env(self.device, self.scratch)
        self.containment = contain(self.scratch.name, self.containment_kind,
                                   getattr(self.launcher, "pids_limit", None))
        argv = self.launcher.argv(worker_argv, self.scratch) if self.launcher else worker_argv
        logf = open(self.scratch / "worker.log", "wb")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(
                self.containment.wrap(argv), stdin=subprocess.PIPE, stdout=logf, stderr=subprocess.STDOUT,
                cwd=self.scratch, env=env, start_new_session=True, close_fds=True, pass_fds=pass_fds,
            )
        except OSError:
            self.containment.kill_all()
            raise
        finally:
            logf.close()
        self.containment.started(self.proc.pid)
        _LIVE.add(self)
        return self

    def kill(self) -> None:
        """Kill the worker and everything it started, wherever that went (idempotent)."""
        with self._kill_lock:
            if self.proc is not None:
                if self.proc.poll() is None:
                    try:
                        os.killpg(self.proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                self.proc.wait()
            if self.containment is not None:
                self.containment.kill_all()  # after the wait: the worker is reaped by its Popen only
            _LIVE.discard(self)

    def run(self, request: WorkerRequest, timeout_s: float, memory_limit_gb: float) -> WorkerExit:
        """Hand the job over and wait; a hang, a crash or a memory blow-up comes back as data."""
        if self.proc is None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        request = self._with_build_dir(request)
        req_path = self.scratch / "request.json"
        req_path.write_text(request.model_dump_json())
        self._await_ready(_STARTUP_LIMIT_S)  # start-up is not the job's time: a loaded machine imports slowly
        t0 = time.monotonic()
        over_memory = threading.Event()
        over_disk = threading.Event()
        done = threading.Event()
        limit = int(memory_limit_gb * 2**30)
        pgid = self.proc.pid

        def watch() -> None:
            tick = 0
            while not done.wait(0.1):
                if _over_memory(pgid, limit):
                    over_memory.set()
                    self.kill()
                    return
                tick += 1
                # Scratch may be RAM (/dev/shm): a candidate filling it must not fill the machine.
                if self.scratch_limit and tick % 3 == 0 and over_scratch(self.scratch, pgid, self.scratch_limit):
                    over_disk.set()
                    self.kill()
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        timed_out = False
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass  # the worker died during start-up; its exit code tells why
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            self.kill()  # the whole group: anything the candidate forked dies too
            done.set()
            watcher.join()
        code = self.proc.returncode
        if self.launcher is not None and self.launcher.shell_exit_codes and code is not None and code > 128:
            code = 128 - code
        report = self._read_report()
        self._promote_builds(request, report)
        return WorkerExit(
            report=report, returncode=code, timed_out=timed_out,
            memory_exceeded=over_memory.is_set(), elapsed_s=time.monotonic() - t0,
            log_tail=_tail(self.scratch / "worker.log"), phase=self._phase(),
            disk_exceeded=over_disk.is_set(),
        )

    def _with_build_dir(self, request: WorkerRequest) -> WorkerRequest:
        return request.model_copy(update={"build_dir": self.build_path}) if self.build_path else request

    def _promote_builds(self, request: WorkerRequest, report: WorkerReport | None) -> None:
        """A candidate that finished (whatever its verdict) leaves its builds to the same source later."""
        if self.build_path and self.host_cache and report is not None and request.task == "candidate":
            from kevolve.sandbox.build.cache import build_scope, promote

            promote(self.scratch / "build", self.host_cache, build_scope(request.candidate_source))

    def _await_ready(self, limit_s: float) -> None:
        """Wait (bounded) until the worker says it is waiting for its job, or has died."""
        assert self.proc is not None
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and self.proc.poll() is None and self._phase() == "start-up":
            time.sleep(0.05)

    def _read_report(self) -> WorkerReport | None:
        path = self.scratch / "report.json"
        if not path.exists():
            return None
        try:
            return WorkerReport.model_validate_json(path.read_text())
        except ValueError:
            return None

    def _phase(self) -> str:
        try:
            return (self.scratch / "phase").read_text().strip() or "start-up"
        except OSError:
            return "start-up"


_LIVE: set[WorkerProcess] = set()  # started and not yet killed


os.register_at_fork(after_in_child=_LIVE.clear)  # a forked child's exit must not kill its parent's workers


@atexit.register
def _kill_live() -> None:
    """At the orchestrator's exit, no worker (warm spares included) or anything of theirs survives."""
    for worker in list(_LIVE):
        try:
            worker.kill()
        except Exception as e:  # noqa: BLE001 - the others must still be killed
            log.warning("killing worker %s at exit: %s", worker.scratch.name, e)
