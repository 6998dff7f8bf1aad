"""The build service: compile candidates' `load_inline` extensions ahead of their evaluation.

`BuildService.submit(spec)` compiles one extension (sandbox/build/recipe.py) on the CPU cores it was given,
de-duplicated by the spec's content key: a key already in `cache_dir/extensions/by-source/<key>/`
is served at once, and concurrent submissions of one key share one build. `submit_source(source)`
reads a candidate's extensions statically (sandbox/build/extensions.py) and submits them: the service
never imports or runs candidate Python.

Every artifact passes the symbol check (sandbox/build/symbols.py) before it is published: a module that imports
what kernels may not is answered REFUSED and never cached (a runner checks every module it loads again).

The C/C++/CUDA text is still untrusted, so every compiler runs the way an evaluation worker runs:
scrubbed environment, its own process group, and under bubblewrap when `isolation` asks for it
(read-only system, no network, no home, the cache read-only, a writable scratch). The artifact is
then moved into the cache by this process, atomically (rename); the first writer wins. Only this
service writes `by-source/`; a candidate's own builds go through `cache.promote` under its scope.

Cache layout (under cache_dir):
    extensions/by-source/<key>/kx_<key>.so, result.json   built here, imported by the worker hook
    extensions/<scope>/...                                  a candidate's own builds (cache.promote)
    pch/<pch id>/torch/extension.h.gch (+ link to the real header)
    shim/<tag>/...                                          slim headers for .cu compiles
    tmp/                                                    build scratch (same filesystem: atomic renames)
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from pydantic import Field

from kevolve.records import Record
from kevolve.sandbox.config import Isolation
from kevolve.sandbox.build.extensions import ExtensionSpec, extract
from kevolve.sandbox.build.symbols import check_module
from kevolve.sandbox.build.recipe import (BY_SOURCE, BuildTarget, StepResult, Toolchain, artifact_dir, build, ensure_shim,
                                          make_pch, module_name, pch_id)

log = logging.getLogger(__name__)
# main.cpp's host flags a precompiled header is made for ahead of time, most used first: 44 KernelBench-leaderboard
# candidates (runs/lbmix) pass extra_cflags [''] (25) or -O3 (3)
WARM_FLAGS: tuple[tuple[str, ...], ...] = ((), ("-O3",))


class BuildStatus(StrEnum):
    """How a submitted extension ended."""

    BUILT = "built"  # compiled now, artifact in the cache
    CACHED = "cached"  # the cache had it already
    FAILED = "failed"  # the compiler refused it (log_tail says why)
    TIMEOUT = "timeout"
    DECLINED = "declined"  # not compiled here (flags or include paths the service does not run): the worker builds it
    REFUSED = "refused"  # built, but the symbol check refused what it imports: not published (log_tail says why)


class BuildResult(Record):
    """One extension build, as the service saw it (never a verdict: the evaluation decides)."""

    ok: bool
    key: str
    status: BuildStatus
    seconds: float = Field(default=0.0, description="wall time from when a build worker took it (0 when cached)")
    queued_s: float = Field(default=0.0, description="from its submission until a build worker took it")
    recipe: str = Field(default="", description="'slim' or 'fallback' for the .cu; '' for C++ only")
    phases: dict[str, float] = Field(default_factory=dict, description="seconds per compile step")
    log_tail: str = Field(default="", description="the failing compiler's output, or why it was declined")
    pch: bool = Field(default=False, description="main.cpp used a precompiled header")


class Prebuilder(Protocol):
    """What a proposer or a runner needs of the service: hand over a candidate's source."""

    def submit_source(self, candidate_source: str) -> list[Future[BuildResult]]: ...


def gpu_arch(device: str) -> str:
    """Compute capability ("9.0") of a `cuda:N` device as torch sees it here, "" for the CPU or none."""
    if not device.startswith("cuda"):
        return ""
    import torch

    if not torch.cuda.is_available():
        return ""
    major, minor = torch.cuda.get_device_capability(int(device.split(":")[1]) if ":" in device else 0)
    return f"{major}.{minor}"


class IsolatedRunner:
    """Runs compiler commands like an evaluation worker: scrubbed env, own process group, bwrap if asked."""

    def __init__(self, cache_dir: Path, isolation: Isolation = Isolation.AUTO, pids_limit: int = 512,
                 bwrap: str | None = None, confine: bool = True) -> None:
        from kevolve.sandbox.isolate import landlock
        from kevolve.sandbox.isolate.bwrap import IsolationUnavailable, find_bwrap, probe

        self.cache_dir, self.pids_limit = cache_dir, pids_limit
        self.bwrap = False
        self.binary = find_bwrap(bwrap)[0] or "bwrap"
        if isolation is not Isolation.NONE:
            works, why = probe("cpu", bwrap)
            if not works and isolation is Isolation.BWRAP:
                raise IsolationUnavailable(f"--isolation bwrap: {why}")
            if not works:
                log.warning("build service compiles without bubblewrap (%s)", why)
            self.bwrap = works
        # without bubblewrap, each compiler confines itself with Landlock first (landlock.py's launcher): it reads
        # what a runner may read and the cache, and writes only its own work folder
        self.landlock = confine and not self.bwrap and landlock.abi() > 0
        self._live: set[int] = set()
        self._lock = threading.Lock()

    def __call__(self, argv: list[str], cwd: Path, timeout_s: float) -> StepResult:
        from kevolve.sandbox.isolate.bwrap import bwrap_argv
        from kevolve.sandbox.isolate.launch import scrubbed_env

        env = scrubbed_env("cpu", cwd)
        env["CUDA_VISIBLE_DEVICES"] = ""
        full = [*bwrap_argv(cwd, (self.cache_dir,), self.pids_limit, "cpu", binary=self.binary), *argv] \
            if self.bwrap else argv
        if self.landlock:
            from kevolve.sandbox.isolate.landlock import launcher

            full = [*launcher(cwd, (self.cache_dir,)), *argv]
        t0 = time.monotonic()
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(full, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
            with self._lock:
                self._live.add(proc.pid)
            try:
                rc: int | None = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                _kill_group(proc)
                with self._lock:
                    self._live.discard(proc.pid)
            out.seek(0)
            text = out.read()[-16000:].decode(errors="replace")
        return StepResult(rc=rc, seconds=time.monotonic() - t0, output=text)

    def kill_all(self) -> None:
        with self._lock:
            pids = list(self._live)
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # anything the compiler (or a flag) left behind
    except ProcessLookupError:
        pass
    proc.wait()


class BuildService:
    """Compile extensions on spare cores, cached by content; see the module docstring."""

    def __init__(self, cache_dir: Path, target: BuildTarget, workers: int = 1, cores: set[int] | None = None, *,
                 isolation: Isolation = Isolation.AUTO, timeout_s: float = 600.0, pids_limit: int = 512,
                 max_pch: int = 4, bwrap: str | None = None, confine: bool = True) -> None:
        self.cache_dir, self.target, self.timeout_s, self.max_pch = cache_dir.resolve(), target, timeout_s, max_pch
        for sub in (BY_SOURCE, Path("tmp"), Path("pch")):
            (self.cache_dir / sub).mkdir(parents=True, exist_ok=True)
        self.run = IsolatedRunner(self.cache_dir, isolation, pids_limit, bwrap, confine)
        self.shim = ensure_shim(self.cache_dir)
        initializer = (lambda: os.sched_setaffinity(0, cores)) if cores else None
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="build", initializer=initializer)
        self._futures: dict[str, Future[BuildResult]] = {}
        self._pch: dict[str, Future[bool]] = {}
        self.pch_seconds: dict[str, float] = {}  # each precompiled header built here: its build's wall
        self._lock = threading.Lock()

    def submit(self, spec: ExtensionSpec) -> Future[BuildResult]:
        """Build `spec` (or find it built); concurrent and repeated submissions of one key share the result."""
        key = spec.key(self.target)
        with self._lock:
            fut = self._futures.get(key)
            if fut is not None:
                return fut
            fut = Future()
            if (artifact_dir(self.cache_dir, key) / f"{module_name(key)}.so").is_file():
                fut.set_result(BuildResult(ok=True, key=key, status=BuildStatus.CACHED))
            elif why := spec.unsafe_reason():
                fut.set_result(BuildResult(ok=False, key=key, status=BuildStatus.DECLINED, log_tail=why))
            else:
                fut = self._pool.submit(self._build, spec, key, time.monotonic())
            self._futures[key] = fut
        return fut

    def submit_source(self, candidate_source: str) -> list[Future[BuildResult]]:
        """Read the candidate's extensions without running it, and submit each one."""
        found = extract(candidate_source)
        for why in found.unknown:
            log.debug("not built ahead: %s", why)
        return [self.submit(s) for s in found.specs]

    def warm(self, flag_sets: tuple[tuple[str, ...], ...] = WARM_FLAGS) -> list[Future[bool]]:
        """Build the precompiled headers that most candidates' main.cpp can use (C++ or CUDA by target)."""
        cuda = bool(self.target.arch)
        specs = [ExtensionSpec(name="pch", cpp_sources=("",), with_cuda=cuda, extra_cflags=f) for f in flag_sets]
        return [self._ensure_pch(s) for s in specs]

    def close(self) -> None:
        """Stop: queued builds are cancelled, running compilers killed."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.run.kill_all()

    def _pch_dir(self, spec: ExtensionSpec) -> Path | None:
        """The PCH for spec's host flags if built; otherwise start building it (bounded) and go without."""
        pid = pch_id(Toolchain.detect(), spec, self.target)
        d = self.cache_dir / "pch" / pid
        if (d / "torch" / "extension.h.gch").is_file():
            return d
        self._ensure_pch(spec)
        return None

    def _ensure_pch(self, spec: ExtensionSpec) -> Future[bool]:
        pid = pch_id(Toolchain.detect(), spec, self.target)
        with self._lock:
            if pid not in self._pch and len(self._pch) < self.max_pch:
                self._pch[pid] = self._pool.submit(self._build_pch, spec, pid)
            done: Future[bool] = Future()
            done.set_result(False)
            return self._pch.get(pid, done)

    def _build_pch(self, spec: ExtensionSpec, pid: str) -> bool:
        res = make_pch(self.cache_dir / "pch" / pid, Toolchain.detect(), spec, self.run, self.cache_dir / "tmp",
                       self.timeout_s)
        if res is not None:
            self.pch_seconds[pid] = res.seconds
        if res is not None and res.rc != 0:
            log.warning("precompiled header %s failed: %s", pid, res.output[-300:])
            return False
        if res is not None:
            log.info("precompiled header %s built in %.1f s", pid, res.seconds)
        return True

    def _build(self, spec: ExtensionSpec, key: str, submitted: float) -> BuildResult:
        t0 = time.monotonic()
        queued = t0 - submitted
        mod = module_name(key)
        work = Path(tempfile.mkdtemp(prefix=f"{key[:8]}-", dir=self.cache_dir / "tmp"))
        try:
            pch = self._pch_dir(spec)
            got = build(spec, self.target, mod, work, self.run, pch_dir=pch,
                        shim=self.shim if spec.cuda_sources else None, timeout_s=self.timeout_s)
            secs = time.monotonic() - t0
            if not got.ok:
                status = BuildStatus.TIMEOUT if got.timed_out else BuildStatus.FAILED
                log.info("build %s (%s) %s after %.1f s", key[:12], spec.name, status.value, secs)
                return BuildResult(ok=False, key=key, status=status, seconds=secs, queued_s=queued, recipe=got.recipe,
                                   phases=got.phases, log_tail=got.log[-4000:], pch=pch is not None)
            checked = check_module(work / f"{mod}.so")
            phases = {**got.phases, "symbols": checked.seconds}
            if not checked.ok:  # never cached as built: a runner that wants it builds (and checks) it itself
                log.info("build %s (%s) refused: %s", key[:12], spec.name, checked.reason(spec.name))
                return BuildResult(ok=False, key=key, status=BuildStatus.REFUSED, seconds=secs, queued_s=queued,
                                   recipe=got.recipe,
                                   phases=phases, log_tail=checked.reason(spec.name), pch=pch is not None)
            res = BuildResult(ok=True, key=key, status=BuildStatus.BUILT, seconds=secs, queued_s=queued, recipe=got.recipe,
                              phases=phases, pch=pch is not None)
            self._publish(work, mod, key, res)
            log.info("built %s (%s) in %.1f s, %s", key[:12], spec.name, secs, got.recipe or "c++")
            return res
        except Exception as e:  # noqa: BLE001 - the service's own failure: logged, the worker builds instead
            log.exception("build service failed on %s", key[:12])
            return BuildResult(ok=False, key=key, status=BuildStatus.FAILED, seconds=time.monotonic() - t0,
                               queued_s=queued, log_tail=f"build service error: {type(e).__name__}: {e}")
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _publish(self, work: Path, mod: str, key: str, res: BuildResult) -> None:
        """Move the artifact into by-source/<key> whole (rename); an existing entry stands."""
        dst = artifact_dir(self.cache_dir, key)
        tmp = dst.parent / f".{key}.{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            so = work / f"{mod}.so"
            if so.is_symlink() or not so.is_file():
                raise FileNotFoundError(f"{mod}.so was not produced")
            shutil.copyfile(so, tmp / so.name)  # a plain copy of the file: never a link the compiler made
            (tmp / "result.json").write_text(res.model_dump_json(indent=1))
            os.rename(tmp, dst)
        except OSError:
            if not dst.exists():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["WARM_FLAGS", "BuildResult", "BuildService", "BuildStatus", "IsolatedRunner", "Prebuilder", "gpu_arch"]
