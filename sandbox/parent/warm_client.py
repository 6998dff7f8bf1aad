"""`kevolve eval`'s end of the warm judge service (warm_service.py): find the service for this key, start it when
there is none, send one evaluation and wait for the answer. Parent zone; light at import (no torch).

Whatever goes wrong — the service cannot start, dies, or says nothing for `hang_s` — is `WarmUnavailable`, and
the caller evaluates cold: the service is a shortcut, never the only way to a verdict.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from kevolve.sandbox.common.protocol import Progress
from kevolve.sandbox.parent.warm_key import (ServiceFiles, WarmKey, WarmUnavailable, all_services, read_info,
                                             service_dir, service_env)

_START_S = 30.0  # a service listens within a second of its start; far beyond that it is not coming


def evaluate(key: WarmKey, request: dict[str, Any], idle_s: float, hang_s: float,
             progress: Callable[[Progress], None] | None = None) -> dict[str, Any]:
    """The service's answer to one `evaluate` request: {"evaluation", "pid", "served", "prepared_ahead"},
    {"problem_error"} or {"cold": why} (this evaluation is not the service's to make)."""
    files = ServiceFiles(service_dir(), key.digest)
    files.check_socket_path()
    t0 = time.monotonic()
    conn, started = _connect_or_start(files, key, idle_s)
    connect_s = time.monotonic() - t0
    try:
        reply = _exchange(files, conn, {"op": "evaluate", "idle_s": idle_s, **request}, hang_s, progress)
        return {**reply, "connect_s": connect_s, "started": started}
    except _Hung:
        _kill(files)  # the next evaluation starts a fresh service
        raise
    finally:
        conn.close()


class _Hung(WarmUnavailable):
    """The service said nothing (not even its heartbeat) for the client's limit."""


def _exchange(files: ServiceFiles, conn: socket.socket, msg: dict[str, Any], hang_s: float,
              progress: Callable[[Progress], None] | None = None) -> dict[str, Any]:
    from kevolve.sandbox.common.channel import Channel, ChannelClosed, Garbled

    try:
        token = files.token.read_text().strip()
    except OSError as e:
        raise WarmUnavailable(f"cannot read the service's token: {e.strerror}") from None
    ch = Channel(conn.fileno(), conn.fileno())
    try:
        ch.send({"token": token, **msg})
        while True:
            reply = ch.recv(hang_s)
            if reply is None:
                raise _Hung(f"no word from the warm judge (pid {read_info(files).get('pid')}) in {hang_s:g} s")
            if "heartbeat" in reply:
                continue
            if "progress" in reply:
                if progress is not None and (p := Progress.read(reply["progress"])) is not None:
                    progress(p)
                continue
            return reply
    except (ChannelClosed, Garbled, OSError) as e:
        raise WarmUnavailable(f"the warm judge closed the connection ({e})") from None


def _connect(files: ServiceFiles) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(files.socket))
        return sock
    except OSError:
        sock.close()
        return None


def _connect_or_start(files: ServiceFiles, key: WarmKey, idle_s: float) -> tuple[socket.socket, bool]:
    """A connection to the service, and whether this call started it."""
    conn = _connect(files)
    if conn is not None:
        return conn, False
    with _flock(files.spawn_lock):  # another `kevolve eval` starting the same service: wait for it, then use it
        conn = _connect(files)
        if conn is not None:
            return conn, False
        _stop_others(files, key)
        _sweep(files)
        proc = _spawn(files, key, idle_s)
        deadline = time.monotonic() + _START_S
        while time.monotonic() < deadline:
            conn = _connect(files)
            if conn is not None:
                return conn, True
            if proc.poll() is not None:
                raise WarmUnavailable(f"the warm judge did not start: {_log_tail(files) or f'exit {proc.returncode}'}")
            time.sleep(0.05)
        raise WarmUnavailable(f"the warm judge did not listen within {_START_S:g} s")


@contextlib.contextmanager
def _flock(path: Any) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _spawn(files: ServiceFiles, key: WarmKey, idle_s: float) -> subprocess.Popen[bytes]:
    f = key.fields
    with os.fdopen(os.open(files.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as log:
        if log.tell() > 2**20:  # keep the log small: one start's worth of lines
            log.truncate(0)
        return subprocess.Popen(
            [sys.executable, "-m", "kevolve.sandbox.parent.warm_service", str(files.dir), files.digest, str(f["device"]),
             str(f["backend"]), str(f["isolation"]), str(idle_s)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=files.dir, env=service_env(),
            start_new_session=True, close_fds=True)


def _log_tail(files: ServiceFiles) -> str:
    try:
        lines = files.log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def _stop_others(files: ServiceFiles, key: WarmKey) -> None:
    """Services of another key for the same device (kevolve edited, another environment) are asked to stop: two
    judges of one device would share its memory and cores. One evaluating finishes first. A service keyed by no
    --device ("default") may hold any device: it goes too."""
    for other in all_services(files.dir):
        device = (read_info(other).get("key") or {}).get("device")  # type: ignore[union-attr]
        if other.digest != files.digest and (device == key.device or "default" in (device, key.device)):
            stop(other, wait_s=0.0)


def _sweep(files: ServiceFiles, older_s: float = 3600.0) -> None:
    """Remove what services of other keys left (each edit of kevolve is another key) once they are gone and their
    files are an hour old."""
    now = time.time()
    for digest in {p.name.split(".", 1)[0] for p in files.dir.iterdir()} - {files.digest}:
        other = ServiceFiles(files.dir, digest)
        mine = [p for p in files.dir.iterdir() if p.name.startswith(digest + ".")]
        try:
            old = all(now - p.lstat().st_mtime > older_s for p in mine)
        except OSError:
            continue
        if old and not _is_service(read_info(other).get("pid"), other):
            for p in mine:
                p.unlink(missing_ok=True)


def stop(files: ServiceFiles, wait_s: float = 10.0) -> bool:
    """Ask one service to stop (it finishes an evaluation under way); a service that does not answer, or is still
    there after `wait_s`, is killed. True if one was running."""
    conn = _connect(files)
    pid = read_info(files).get("pid")
    if conn is None:
        return _kill(files)
    try:
        _exchange(files, conn, {"op": "stop"}, 5.0)
    except WarmUnavailable:
        return _kill(files)
    finally:
        conn.close()
    deadline = time.monotonic() + wait_s
    while wait_s and _is_service(pid, files) and time.monotonic() < deadline:
        time.sleep(0.1)
    if wait_s and _is_service(pid, files):
        _kill(files)
    return True


def status(files: ServiceFiles) -> dict[str, Any] | None:
    """A running service's own account (pid, evaluations served, idle time …), None if none answers."""
    conn = _connect(files)
    if conn is None:
        return None
    try:
        return _exchange(files, conn, {"op": "status"}, 5.0)
    except WarmUnavailable:
        return None
    finally:
        conn.close()


def _is_service(pid: object, files: ServiceFiles) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False
    return b"kevolve.sandbox.parent.warm_service" in cmd and files.digest.encode() in cmd


def _kill(files: ServiceFiles) -> bool:
    """Kill a service that does not answer (its judge follows once its channel closes); its files go with it."""
    pid = read_info(files).get("pid")
    alive = _is_service(pid, files)
    if alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]
    for p in (files.socket, files.token, files.info):
        p.unlink(missing_ok=True)
    return alive


def stop_all() -> int:
    """Stop every service of this user; how many were running."""
    return sum(stop(f) for f in all_services(service_dir()))


def status_all() -> list[tuple[ServiceFiles, dict[str, Any] | None]]:
    return [(f, status(f)) for f in all_services(service_dir())]


__all__ = ["WarmUnavailable", "evaluate", "status", "status_all", "stop", "stop_all"]
