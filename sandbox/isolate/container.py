"""Docker backend: the same runner inside a locked-down container, one container per candidate.

A container has no network, a read-only root filesystem, a small tmpfs /tmp, the host's scratch
directory bind-mounted at /scratch (watched for size from outside), the build cache read-only at
/cache (builds go to /scratch/build; the host promotes them, see cache.promote), a non-root user, no capabilities, memory (no swap), pids and CPU limits, and, for a GPU
device, only that GPU. The evaluation timeout is enforced from outside: the host kills the
container. The judge keeps spare containers started ahead (torch already imported) and replaces any
that died before use; a container serves exactly one candidate, like a local runner, so nothing a
candidate leaves behind reaches the next one.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.isolate.gpu_passthrough import HostGpu, NoGpuNodes, docker_gpu, ldconfig_listing
from kevolve.sandbox.isolate.launch import _dir_bytes, _tail, cache_vars, scrubbed_env, unlinked_bytes_of
from kevolve.sandbox.judge.runner_proc import Gone, RunnerProcess

log = logging.getLogger(__name__)

CONTAINER_USER = "1000:1000"
_ENV_KEEP = ("HOME", "TMPDIR", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", *cache_vars(),
             "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_LABEL = "org.kevolve.worker"
_OWNER = "org.kevolve.owner"  # boot id : pid namespace : pid : start time of the judge that started it


def owner_tag(pid: int | None = None) -> str:
    """Who started a container: this machine's boot, this pid namespace, and the process (its pid and
    start time, so that a reused pid is another owner); '' where /proc does not say (not Linux)."""
    pid = os.getpid() if pid is None else pid
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        ns = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""
    start = _start_time(pid)
    return f"{boot}:{ns}:{pid}:{start}" if start is not None else ""


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]  # field 22, starttime (the name may hold spaces)


def _parse(tag: str) -> tuple[str, str, str, str] | None:
    """(boot id, pid namespace, pid, start time) of an owner tag; None for no tag (the namespace
    holds a colon itself: 'pid:[4026531836]')."""
    boot, _, rest = tag.partition(":")
    parts = rest.rsplit(":", 2)
    return (boot, *parts) if boot and len(parts) == 3 else None  # type: ignore[return-value]


def _owner_alive(tag: str, here: str | None = None) -> bool:
    """Whether a tag's judge still runs; True for another machine's or pid namespace's (not ours to judge)."""
    owner, mine = _parse(tag), _parse(owner_tag() if here is None else here)
    if owner is None or mine is None or owner[:2] != mine[:2]:
        return True
    pid, start = owner[2], owner[3]
    return pid.isdigit() and _start_time(int(pid)) == start


def left_behind(client: Any) -> tuple[list[Any], list[Any]]:
    """Worker containers (any state) whose judge is gone, and those with no owner label (kevolve
    before owner labels; whether their judge lives cannot be told). Raises what the engine raises."""
    here = owner_tag()
    orphans, unowned = [], []
    for c in client.containers.list(all=True, filters={"label": f"{_LABEL}=1"}):
        tag = (c.labels or {}).get(_OWNER, "")
        if _parse(tag) is None:
            unowned.append(c)
        elif not _owner_alive(tag, here):
            orphans.append(c)
    return orphans, unowned


def remove_containers(containers: list[Any]) -> int:
    removed = 0
    for c in containers:
        try:
            c.remove(force=True)
            removed += 1
        except Exception as e:  # noqa: BLE001 - removed meanwhile
            log.debug("removing %s: %s", c.short_id, e)
    return removed


def sweep_orphans(client: Any) -> int:
    """Remove worker containers whose judge is gone: a judge killed with SIGKILL (or by `killpg`
    after a shutdown that did not answer) cannot remove its runners, and a spare waits on its FIFOs
    for ever (both ends are opened read-write, so no EOF tells it). Only containers started on this
    machine and in this pid namespace are judged; those from before owner labels are left alone
    (`kevolve sandbox prune --all`). Returns how many were removed."""
    try:
        orphans, _ = left_behind(client)
    except Exception as e:  # noqa: BLE001 - the engine went away: nothing swept, nothing lost
        log.debug("listing worker containers: %s", e)
        return 0
    removed = remove_containers(orphans)
    if removed:
        log.info("removed %d worker container(s) left by a judge that is gone", removed)
    return removed


class DockerUnavailable(RuntimeError):
    """The Docker engine or the evaluation image is missing: the machine's fault, not a candidate's."""


def container_env(device: str) -> dict[str, str]:
    """The worker's environment inside the container: the local one's safe keys, nothing from the host."""
    env = {k: v for k, v in scrubbed_env(device, Path("/scratch")).items() if k in _ENV_KEEP}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    if device.startswith("cuda"):
        env["CUDA_VISIBLE_DEVICES"] = "0"  # the one GPU passed in is device 0 inside
    return env


def _user_for(scratch: Path) -> str:
    """Non-root in the container: the host user's ids, or 1000 when the host user is root."""
    if os.geteuid() != 0:
        return f"{os.getuid()}:{os.getgid()}"
    os.chown(scratch, 1000, 1000)
    return CONTAINER_USER


class ContainerRunner(RunnerProcess):
    """A runner whose process is a container: `start()` creates and starts it warm.

    The judge talks to it through the FIFOs in its bind-mounted scratch directory, exactly as with a
    local runner; shared CPU buffers are files there too. The host kills the container at the
    deadline; Docker's memory cgroup kills it past its limit (OOMKilled).
    """

    @property
    def freezes(self) -> bool:  # type: ignore[override]
        return self._freezer() is not None

    def _freezer(self) -> Any:
        """The container's cgroup freeze switch (its process is the `docker` client, not the container),
        found once from its init's /proc entry; None where the judge cannot write it."""
        if getattr(self, "_freeze_switch", False) is False:
            from kevolve.sandbox.isolate import freezer

            pid = self._state(max_age=0.0).get("Pid") if self.container is not None else None
            self._freeze_switch = freezer.of(pid) if isinstance(pid, int) and pid > 0 else None
        return self._freeze_switch

    def freeze(self, on: bool) -> None:
        """Frozen between the judge's commands as a local runner is, through the container's cgroup (every
        process in it, a daemon too); where that cannot be written, not frozen, and its limits stand alone."""
        if on == getattr(self, "_frozen", False) or self.container is None:
            return
        switch = self._freezer()
        if switch is not None and switch.freeze(on):
            self._frozen = on


    def __init__(self, client: Any, config: SandboxConfig, root: Path | None = None,
                 gpu_host: HostGpu | None = None) -> None:
        super().__init__(config.device, root, scratch_limit_gb=config.scratch_limit_gb)
        self.client = client
        self.gpu_host = gpu_host  # where the GPU's nodes and driver libraries are (None: this machine's)
        self.config = config
        self.container: Any = None
        self.started_at = 0.0
        self.cache = config.cache_dir.resolve() / "docker"
        self.build_path, self.host_cache = "/scratch/build", self.cache  # the cache is mounted read-only
        self.cache_dir_inside = "/cache"

    def start(self) -> ContainerRunner:
        from kevolve.sandbox.common.channel import Channel, make_fifos

        make_fifos(self.scratch, "cmd", "res")
        (self.scratch / "build").mkdir(exist_ok=True)
        user = _user_for(self.scratch)
        if os.geteuid() == 0:
            for name in ("cmd", "res", "build"):
                os.chown(self.scratch / name, 1000, 1000)
        self.cache.mkdir(parents=True, exist_ok=True)
        cfg = self.config
        gpu = gpu_run_args(cfg.device, nvidia_runtime(self.client), self.gpu_host) if cfg.is_cuda else {}
        env = {**container_env(cfg.device), **gpu.pop("environment", {})}
        mem = int(cfg.memory_limit_gb * 2**30)
        self.started_at = time.monotonic()
        self.container = self.client.containers.run(
            cfg.image, [cfg.device], detach=True, user=user, working_dir="/scratch",
            environment=env, network_mode="none", read_only=True,
            tmpfs={"/tmp": "size=256m,mode=1777"},
            volumes={str(self.scratch): {"bind": "/scratch", "mode": "rw"},
                     str(self.cache): {"bind": "/cache", "mode": "ro"}},
            mem_limit=mem, memswap_limit=mem, pids_limit=cfg.pids_limit, nano_cpus=int(cfg.cpus * 1e9),
            cap_drop=["ALL"], security_opt=["no-new-privileges"], init=True, ipc_mode="private",
            labels={_LABEL: "1", _OWNER: owner_tag()}, shm_size=64 * 2**20, **gpu,
        )
        self.ch = Channel.fifos(self.scratch, "res", "cmd")
        self._over_memory = threading.Event()
        self._over_disk = threading.Event()
        self._stop_watch = threading.Event()
        self.warm = False
        self._state_cache: tuple[float, dict[str, Any]] = (0.0, {})
        return self

    def _state(self, max_age: float = 0.5) -> dict[str, Any]:
        at, state = self._state_cache
        if self.container is None:
            return state
        if time.monotonic() - at > max_age:
            try:
                self.container.reload()
                state = self.container.attrs.get("State", {})
            except Exception:  # noqa: BLE001 - gone
                state = {"Status": "removed"}
            self._state_cache = (time.monotonic(), state)
        return state

    def alive(self) -> bool:
        return self.container is not None and self._state().get("Status") in ("created", "running")

    def healthy(self) -> bool:
        return self.alive()

    def watch(self, memory_limit_gb: float) -> None:
        """Docker enforces memory; the host watches the scratch dir's size, and (every third look, when the folder
        alone is under the limit) the removed files the container's processes still hold: the scratch is a host
        folder, and a file removed but held open there is in no folder the sum reads (launch.unlinked_bytes_of)."""

        def run() -> None:
            tick = 0
            while not self._stop_watch.wait(0.3):
                tick += 1
                if not self.scratch_limit:
                    continue
                used = _dir_bytes(self.scratch)
                if used > self.scratch_limit or tick % 3 == 0 and (
                        used + unlinked_bytes_of(self._pids()) > self.scratch_limit):
                    self._over_disk.set()
                    self._stop()
                    return

        threading.Thread(target=run, daemon=True).start()

    def _pids(self) -> list[int]:
        """The host's ids of the container's processes: those in its init process's cgroups (cgroup v1 or v2)."""
        try:
            mine = Path(f"/proc/{self._state().get('Pid')}/cgroup").read_bytes()
        except OSError:
            return []
        found: list[int] = []
        for d in os.listdir("/proc"):
            try:
                if d.isdigit() and Path(f"/proc/{d}/cgroup").read_bytes() == mine:
                    found.append(int(d))
            except OSError:
                continue
        return found

    def gone(self, timed_out: bool = False, garbled: str = "") -> Gone:
        self._stop()
        state = self._state(max_age=0.0)
        code = state.get("ExitCode")
        if isinstance(code, int) and code > 128 and (code - 128) in signal.Signals._value2member_map_:
            code = 128 - code  # tini reports a death by signal N as 128+N
        return Gone(returncode=code if isinstance(code, int) else None, timed_out=timed_out,
                    memory_exceeded=bool(state.get("OOMKilled")), disk_exceeded=self._over_disk.is_set(),
                    garbled=garbled, log_tail=self._logs())

    def cpu_seconds(self) -> float:
        return 0.0  # docker stats would cost a second per call; not measured for containers

    def precise_cpu_seconds(self) -> float | None:
        return None

    def _stop(self) -> None:
        if self.container is None:
            return
        if getattr(self, "_frozen", False):  # a frozen process takes its SIGKILL only once thawed
            self.freeze(False)
        try:
            self.container.kill()
        except Exception:  # noqa: BLE001 - already exited
            pass
        try:
            self.container.wait(timeout=30)
        except Exception:  # noqa: BLE001
            pass

    def kill(self) -> None:
        if hasattr(self, "_stop_watch"):
            self._stop_watch.set()
        if self.container is None:
            return
        if getattr(self, "_frozen", False):
            self.freeze(False)
        self._logs()
        try:
            self.container.remove(force=True)
        except Exception as e:  # noqa: BLE001 - already gone
            log.debug("removing %s: %s", self.container.short_id, e)
        self.container = None

    def _logs(self) -> str:
        if self.container is None:
            return _tail(self.scratch / "worker.log")
        try:
            text = self.container.logs(tail=40).decode(errors="replace")
        except Exception:  # noqa: BLE001
            return ""
        (self.scratch / "worker.log").write_text(text)
        return text


def gpu_run_args(device: str, toolkit: bool, host: HostGpu | None = None) -> dict[str, Any]:
    """`containers.run` arguments that give the container the GPU `device` names ('cuda', 'cuda:N').

    With the NVIDIA container runtime (`toolkit`), its device request; without it, what the toolkit
    would have passed (sandbox/isolate/gpu_passthrough.py): the GPU's and the control device nodes, the
    driver's libraries read-only, and the environment that finds them. DockerUnavailable when the
    host has neither the nodes nor libcuda (the machine's fault, retried, never a verdict).
    """
    from docker.types import DeviceRequest, Mount

    index = int(device.split(":", 1)[1]) if ":" in device else 0
    if toolkit:
        return {"device_requests": [DeviceRequest(device_ids=[str(index)], capabilities=[["gpu"]])]}
    try:
        gpu = docker_gpu(index, host or _this_host())
    except NoGpuNodes as e:
        raise DockerUnavailable(f"no NVIDIA container runtime, and the GPU cannot be passed by hand: {e}") from None
    return {"devices": list(gpu.devices), "environment": dict(gpu.environment),
            "mounts": [Mount(target=inside, source=src, type="bind", read_only=True) for src, inside in gpu.binds]}


@functools.cache
def _this_host() -> HostGpu:
    return HostGpu(ldconfig=ldconfig_listing())


@functools.cache
def nvidia_runtime(client: Any) -> bool:
    """Whether the engine has the NVIDIA container runtime (`docker info` lists an `nvidia` runtime)."""
    try:
        return "nvidia" in (client.info().get("Runtimes") or {})
    except Exception:  # noqa: BLE001 - an engine that cannot say: pass the GPU by hand
        return False


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


__all__ = ["ContainerRunner", "DockerUnavailable", "container_env", "docker_client", "gpu_run_args",
           "left_behind", "nvidia_runtime", "owner_tag", "remove_containers", "sweep_orphans"]
