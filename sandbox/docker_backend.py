"""Docker backend: the same worker inside a locked-down container, one container per job.

A container has no network, a read-only root filesystem, a small tmpfs /tmp, the host's scratch
directory bind-mounted at /scratch (watched for size from outside), the build cache read-only at
/cache (builds go to /scratch/build; the host promotes them, see compile.promote), a non-root user, no capabilities, memory (no swap), pids and CPU limits, and, for a GPU
device, only that GPU. The evaluation timeout is enforced from outside: the host kills the
container. `DockerPool` keeps warm containers (torch already imported) ready, checks each one's
health before handing it out and replaces any that died; a container serves exactly one job, like
a local worker, so nothing a candidate leaves behind reaches the next one.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.isolation import WorkerExit, WorkerProcess, _dir_bytes, scrubbed_env
from kevolve.sandbox.protocol import WorkerRequest

log = logging.getLogger(__name__)

CONTAINER_USER = "1000:1000"
_ENV_KEEP = ("HOME", "TMPDIR", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "CUPY_CACHE_DIR",
             "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_LABEL = "org.kevolve.worker"


class DockerUnavailable(RuntimeError):
    """The Docker engine or the evaluation image is missing: the machine's fault, not a candidate's."""


def container_env(device: str) -> dict[str, str]:
    """The worker's environment inside the container: the local one's safe keys, nothing from the host."""
    env = {k: v for k, v in scrubbed_env(device, Path("/scratch")).items() if k in _ENV_KEEP}
    env.update(PATH="/usr/local/bin:/usr/bin:/bin", CUPY_CACHE_DIR="/scratch/cupy")
    if device.startswith("cuda"):
        env["CUDA_VISIBLE_DEVICES"] = "0"  # the one GPU passed in is device 0 inside
    return env


def _user_for(scratch: Path) -> str:
    """Non-root in the container: the host user's ids, or 1000 when the host user is root."""
    if os.geteuid() != 0:
        return f"{os.getuid()}:{os.getgid()}"
    os.chown(scratch, 1000, 1000)
    return CONTAINER_USER


class ContainerWorker(WorkerProcess):
    """A WorkerProcess whose process is a container: start() creates and starts it warm."""

    def __init__(self, client: Any, config: SandboxConfig, root: Path | None = None) -> None:
        super().__init__(config.device, root, scratch_limit_gb=config.scratch_limit_gb)
        self.client = client
        self.config = config
        self.container: Any = None
        self.started_at = 0.0
        self.cache = config.cache_dir.resolve() / "docker"
        self.build_path, self.host_cache = "/scratch/build", self.cache  # the cache is mounted read-only

    def start(self) -> ContainerWorker:
        from docker.types import DeviceRequest

        os.mkfifo(self.scratch / "go", 0o600)
        user = _user_for(self.scratch)
        if os.geteuid() == 0:
            os.chown(self.scratch / "go", 1000, 1000)
        self.cache.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(self.cache, 1000, 1000)
        cfg = self.config
        gpus = []
        if cfg.device.startswith("cuda"):
            ids = [cfg.device.split(":", 1)[1]] if ":" in cfg.device else ["0"]
            gpus = [DeviceRequest(device_ids=ids, capabilities=[["gpu"]])]
        mem = int(cfg.memory_limit_gb * 2**30)
        self.started_at = time.monotonic()
        self.container = self.client.containers.run(
            cfg.image, [cfg.device], detach=True, user=user, working_dir="/scratch",
            environment=container_env(cfg.device), network_mode="none", read_only=True,
            tmpfs={"/tmp": "size=256m,mode=1777"},
            volumes={str(self.scratch): {"bind": "/scratch", "mode": "rw"},
                     str(self.cache): {"bind": "/cache", "mode": "ro"}},
            mem_limit=mem, memswap_limit=mem, pids_limit=cfg.pids_limit, nano_cpus=int(cfg.cpus * 1e9),
            cap_drop=["ALL"], security_opt=["no-new-privileges"], init=True, ipc_mode="private",
            device_requests=gpus, labels={_LABEL: "1"}, shm_size=64 * 2**20,
        )
        return self

    def healthy(self) -> bool:
        """Still running (a worker that died while starting up is replaced, not handed out)."""
        try:
            self.container.reload()
        except Exception:  # noqa: BLE001 - gone is unhealthy
            return False
        return self.container.status in ("created", "running")

    def kill(self) -> None:
        if self.container is None:
            return
        try:
            self.container.remove(force=True)
        except Exception as e:  # noqa: BLE001 - already gone
            log.debug("removing %s: %s", self.container.short_id, e)
        self.container = None

    def run(self, request: WorkerRequest, timeout_s: float, memory_limit_gb: float) -> WorkerExit:
        """Hand the job over through the pipe and wait; the host kills the container at the deadline."""
        if self.container is None:
            self.start()
        request = self._with_build_dir(request)
        req = request.model_copy(update={"cache_dir": "/cache"})
        (self.scratch / "request.json").write_text(req.model_dump_json())
        t0 = time.monotonic()
        self._signal_go(t0 + timeout_s)
        over_disk = threading.Event()
        done = threading.Event()

        def watch_disk() -> None:
            while not done.wait(0.3):
                if self.scratch_limit and _dir_bytes(self.scratch) > self.scratch_limit:
                    over_disk.set()
                    self._stop()
                    return

        watcher = threading.Thread(target=watch_disk, daemon=True)
        watcher.start()
        timed_out = False
        try:
            self.container.wait(timeout=max(0.1, timeout_s - (time.monotonic() - t0)))
        except Exception:  # noqa: BLE001 - requests' ReadTimeout/ConnectionError: past the deadline
            timed_out = not over_disk.is_set()
            self._stop()
        finally:
            done.set()
            watcher.join()
        state = self._state()
        code = state.get("ExitCode")
        if isinstance(code, int) and code > 128 and (code - 128) in signal.Signals._value2member_map_:
            code = 128 - code  # tini reports a death by signal N as 128+N
        report = self._read_report()
        self._promote_builds(request, report)
        return WorkerExit(
            report=report, returncode=code, timed_out=timed_out,
            memory_exceeded=bool(state.get("OOMKilled")), elapsed_s=time.monotonic() - t0,
            log_tail=self._logs(), phase=self._phase(), disk_exceeded=over_disk.is_set(),
        )

    def _signal_go(self, deadline: float) -> None:
        # Opening a pipe for writing without blocking fails until the worker holds its end.
        while time.monotonic() < deadline:
            try:
                fd = os.open(self.scratch / "go", os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                if not self.healthy():
                    return  # died in start-up: its exit code tells why
                time.sleep(0.05)
                continue
            try:
                os.write(fd, b"go\n")
            finally:
                os.close(fd)
            return

    def _stop(self) -> None:
        try:
            self.container.kill()
        except Exception:  # noqa: BLE001 - already exited
            pass
        try:
            self.container.wait(timeout=30)
        except Exception:  # noqa: BLE001
            pass

    def _state(self) -> dict[str, Any]:
        try:
            self.container.reload()
            return self.container.attrs.get("State", {})
        except Exception:  # noqa: BLE001
            return {}

    def _logs(self) -> str:
        try:
            text = self.container.logs(tail=40).decode(errors="replace")
        except Exception:  # noqa: BLE001
            return ""
        (self.scratch / "worker.log").write_text(text)
        return text


class DockerPool:
    """Warm containers per configuration; `__call__(config)` hands one out (LocalSandbox.workers)."""

    def __init__(self, size: int = 1, scratch_root: Path | None = None, client: Any = None) -> None:
        self.size = size
        self.scratch_root = scratch_root
        self._client = client
        self._spares: dict[str, list[ContainerWorker]] = defaultdict(list)
        self._lock = threading.Lock()
        self.replaced = 0  # warm containers that died before use and were replaced
        self.start_s: list[float] = []  # time from create to handing out, per container
        atexit.register(self.close)  # spares wait on their pipe forever: never leave them behind

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = docker_client()
        return self._client

    def __call__(self, config: SandboxConfig) -> ContainerWorker:
        key = config.model_dump_json(include={"device", "image", "memory_limit_gb", "pids_limit", "cpus",
                                              "cache_dir", "scratch_limit_gb"})
        worker = None
        with self._lock:
            spares = self._spares[key]
            while spares and worker is None:
                w = spares.pop(0)
                if w.healthy():
                    worker = w
                else:
                    log.warning("warm container %s died before use; replacing it", w.container.short_id)
                    self.replaced += 1
                    w.kill()
                    shutil.rmtree(w.scratch, ignore_errors=True)
            while len(spares) < self.size - (worker is None):
                spares.append(ContainerWorker(self.client, config, self.scratch_root).start())
        if worker is None:
            worker = ContainerWorker(self.client, config, self.scratch_root).start()
        self.start_s.append(time.monotonic() - worker.started_at)
        return worker

    def close(self) -> None:
        with self._lock:
            for spares in self._spares.values():
                for w in spares:
                    w.kill()
                    shutil.rmtree(w.scratch, ignore_errors=True)
            self._spares.clear()


def docker_client() -> Any:
    """A Docker client, or DockerUnavailable with the reason in one line."""
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
    except ImportError:
        raise DockerUnavailable("the docker Python package is not installed (pip install docker)") from None
    except Exception as e:  # noqa: BLE001 - DockerException, connection refused …
        raise DockerUnavailable(f"Docker engine not reachable: {engine_error(e)}") from e
    return client


def engine_error(e: BaseException) -> str:
    """One plain line for why the engine could not be reached (no exception reprs, no tuples).

    docker-py wraps the socket's OSError in requests' and urllib3's errors, whose text is a tuple
    repr: "('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))".
    """
    seen: list[BaseException] = []
    todo: list[object] = [e]
    while todo:
        x = todo.pop()
        if isinstance(x, BaseException) and x not in seen:
            seen.append(x)
            todo += [x.__cause__, x.__context__, *x.args]
    os_error = next((x for x in seen if isinstance(x, OSError) and x.strerror), None)
    if isinstance(os_error, FileNotFoundError):
        return "no engine socket (dockerd is not running here, or DOCKER_HOST points elsewhere)"
    if isinstance(os_error, PermissionError):
        return "permission denied on the engine's socket (is this user in the docker group?)"
    if isinstance(os_error, ConnectionRefusedError):
        return "connection refused (dockerd is not running, or DOCKER_HOST points elsewhere)"
    if os_error is not None:
        return os_error.strerror
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return re.sub(r"\s*\(.*\)\s*$", "", text)[:200] or type(e).__name__


def image_present(client: Any, image: str) -> bool:
    try:
        client.images.get(image)
    except Exception:  # noqa: BLE001 - ImageNotFound
        return False
    return True


def docker_sandbox(config: SandboxConfig, pool_size: int = 1, scratch_root: Path | None = None):  # noqa: ANN201
    """A LocalSandbox whose workers are warm containers (same verdict logic, same interface)."""
    from kevolve.sandbox.local import LocalSandbox

    client = docker_client()
    if not image_present(client, config.image):
        raise DockerUnavailable(f"image {config.image} not found: run `kevolve sandbox build-image`")
    return LocalSandbox(scratch_root=scratch_root, workers=DockerPool(pool_size, scratch_root, client))


__all__ = ["ContainerWorker", "DockerPool", "DockerUnavailable", "container_env", "docker_client",
           "docker_sandbox"]
