"""The warm judge service: a parent process that keeps a `LocalSandbox` (its judge, the judge's warm spare runners
and the next evaluation's problem prepared ahead) between `kevolve eval`s, so the second and later evaluations
on a machine wait seconds, not the judge's start. Parent zone: it never imports or runs candidate code; the
judge and the runners are the same as a cold evaluation's (sandbox/parent/local.py, sandbox/judge/serve.py).

Entry point `python -m kevolve.sandbox.parent.warm_service DIR DIGEST DEVICE BACKEND ISOLATION IDLE_S`, started by
`warm_client.py` in its own session. It serves one unix socket in the user's private folder (warm_key.py) and
answers a peer only when (1) the kernel says it runs as this user (SO_PEERCRED), (2) it is not a descendant of
this service or of any kevolve judge (a candidate's runner is one), and (3) its request carries the token kept
in a 0600 file of that folder (outside every runner's view). A refused peer gets nothing back.

Trust as a cold evaluation: each evaluation gets problem data of its own. With no --seed, a fresh secret seed
(fresh draws, truth and eager baseline), prepared while the service was idle after the previous evaluation of
the same problem and configuration, and used by that one evaluation only; with --seed, the same draws a cold
evaluation would make (its fresh and timing draws new each time). Candidates run in fresh runners; the
reference is still timed beside the candidate in the evaluation itself (sandbox/judge/session.py).
"""

from __future__ import annotations

import fcntl
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from kevolve.sandbox.parent.warm_key import HEARTBEAT_S, ServiceFiles, WarmKey, readable_by_runners

log = logging.getLogger("kevolve.warm")
_REQUEST_S = 10.0  # a peer that has not sent its whole request by then is dropped


def peer_refusal(conn: socket.socket) -> str | None:
    """Why this connection's peer may not use the service, or None. Its pid and uid come from the kernel."""
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    if uid != os.getuid():
        return f"peer runs as uid {uid}"
    if pid <= 0:
        return "peer's pid is not visible here (another PID namespace)"
    chain = _ancestors(pid)
    if chain is None:
        return f"peer {pid} is gone"
    if os.getpid() in chain:
        return f"peer {pid} descends from this service (a judge's runner)"
    for p in chain:
        if _is_kevolve_worker(p):
            return f"peer {pid} descends from a kevolve judge or runner ({p})"
    return None


def _ancestors(pid: int) -> list[int] | None:
    """`pid` and its parents up to init, by /proc; None if `pid` is gone."""
    chain = []
    while pid > 1 and len(chain) < 256:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None if not chain else chain
        chain.append(pid)
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return chain


def _is_kevolve_worker(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"kevolve.sandbox.judge." in cmd or b"kevolve.sandbox.runner" in cmd


class _Peer:
    """One connection: frames out under a lock (the heartbeat and the answer share it); a peer gone is no error."""

    def __init__(self, conn: socket.socket) -> None:
        from kevolve.sandbox.common.channel import Channel

        self.conn, self.ch, self.lock, self.gone = conn, Channel(conn.fileno(), conn.fileno()), threading.Lock(), False
        self.state = "queued"

    def send(self, msg: dict[str, Any]) -> None:
        with self.lock:
            if self.gone:
                return
            try:
                self.ch.send(msg)
            except Exception:  # noqa: BLE001 - the client went away (Ctrl-C): the work goes on, unanswered
                self.gone = True

    def heartbeat(self, done: threading.Event) -> None:
        while not done.wait(HEARTBEAT_S):
            self.send({"heartbeat": self.state})


class Service:
    """Evaluations one at a time through one LocalSandbox; the next one's problem prepared while idle."""

    def __init__(self, files: ServiceFiles, key: WarmKey, idle_s: float) -> None:
        self.files, self.key, self.idle_s = files, key, idle_s
        self.token = secrets.token_hex(32)
        self.work = threading.Lock()
        self.box: Any = None
        self.device: str | None = None if key.device == "default" else key.device
        self.served, self.active, self.last = 0, 0, time.monotonic()
        self.count_lock = threading.Lock()  # `active` is counted by every connection's thread
        self.doing = "idle"  # or "evaluating", "preparing the next problem"
        self.started = time.time()
        self.stopping = threading.Event()
        self.ahead: tuple[str, int] | None = None  # (what it was prepared for, its seed)

    # ------------------------------------------------------------------ requests

    def handle(self, conn: socket.socket) -> None:
        with self.count_lock:
            self.active += 1
        try:
            why = peer_refusal(conn)
            if why:
                log.warning("refused a connection: %s", why)
                return
            peer = _Peer(conn)
            req = peer.ch.recv(_REQUEST_S)
            if not isinstance(req, dict) or not hmac.compare_digest(str(req.get("token", "")), self.token):
                log.warning("refused a request without this service's token")
                return
            op = req.get("op")
            if op == "status":
                peer.send(self.status())
            elif op == "stop":
                self.stopping.set()
                peer.send({"ok": True, "pid": os.getpid()})
            elif op == "evaluate":
                self._evaluate(peer, req)
        except Exception as e:  # noqa: BLE001 - one client's failure is logged, the service goes on
            log.exception("request failed: %s", e)
        finally:
            conn.close()
            with self.count_lock:
                self.active -= 1

    def status(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "served": self.served, "device": self.device or self.key.device,
                "isolation": self.key.fields["isolation"], "backend": self.key.fields["backend"],
                "idle_s": self.idle_s, "started": self.started, "busy": self.work.locked(), "doing": self.doing,
                "idle_for_s": round(time.monotonic() - self.last, 1), "prepared_ahead": self.ahead is not None}

    def _evaluate(self, peer: _Peer, req: dict[str, Any]) -> None:
        done = threading.Event()
        threading.Thread(target=peer.heartbeat, args=(done,), daemon=True).start()
        t0 = time.monotonic()
        try:
            with self.work:
                peer.state = self.doing = "evaluating"
                if req.get("idle_s"):
                    self.idle_s = float(req["idle_s"])
                queued = time.monotonic() - t0
                reply, after = self._judge_one(req, peer)
                reply["queued_s"] = queued
                self.last = time.monotonic()
                done.set()
                peer.send(reply)
                if after is not None:
                    self.doing = "preparing the next problem"
                    after()  # the next evaluation's problem, while the client prints this one
        finally:
            self.doing = "idle"
            done.set()
            self.last = time.monotonic()  # idle from here (a status request is no use)

    def _judge_one(self, req: dict[str, Any], peer: _Peer) -> tuple[dict[str, Any], Callable[[], None] | None]:
        from kevolve.contract import ProblemError
        from kevolve.records import Candidate, Outcome, Problem
        from kevolve.sandbox.config import SandboxConfig
        from kevolve.sandbox.parent.local import JudgeLost

        problem = Problem.model_validate(req["problem"])
        cand = Candidate.model_validate(req["candidate"])
        given = dict(req.get("config") or {})
        if (why := self._check(given)) is not None:
            return {"cold": why}, None
        config = SandboxConfig.model_validate({**given, "device": self.device})
        box = self._box(config)
        if isinstance(box, str):
            return {"cold": box}, None
        match, seed, ahead = self._seed_for(problem, config)
        box.progress = lambda p: peer.send({"progress": p.model_dump()})
        t0 = time.monotonic()
        seeded = config.model_copy(update={"seed": seed})
        try:
            if not ahead:  # prepared here as the judge would, but through the box: it keeps the baselines
                try:
                    box.reference(problem, seeded)
                except JudgeLost:
                    pass  # the evaluation below meets the same fault and gives it as its verdict
            ev = box.evaluate(problem, cand, seeded)
        except ProblemError as e:
            box.forget()
            return {"problem_error": str(e)}, None
        finally:
            box.progress = None
        self.served += 1
        reply = {"evaluation": ev.model_dump(mode="json"), "pid": os.getpid(), "served": self.served,
                 "prepared_ahead": ahead, "evaluate_s": time.monotonic() - t0}
        if ev.outcome is Outcome.INFRA_ERROR:  # the judge itself may be what broke: the next request gets a new one
            self._retire()  # (red team 6: a candidate lowered the warm judge's open-file limit; every later verdict
            return reply, None  # was infra_error until warm-stop)
        return reply, lambda: self._prepare_next(problem, config, match)

    def _retire(self) -> None:
        """Close the sandbox (its judge and runners) after an evaluation that ended in infra_error."""
        box, self.box, self.ahead = self.box, None, None
        if box is not None:
            try:
                box.close()
            except Exception:  # noqa: BLE001 — a judge that broke may not close cleanly: it is dropped either way
                pass

    def _check(self, given: dict[str, Any]) -> str | None:
        """Why this request is not for this service (its flags are the key's), or None."""
        for field in ("backend", "isolation"):
            if given.get(field, "local" if field == "backend" else "auto") != self.key.fields[field]:
                return f"the request's {field} is not this service's"
        if given.get("device") not in (None, self.key.device):
            return "the request's device is not this service's"
        from kevolve.sandbox.parent import device_probe

        if self.device is None:
            self.device = device_probe.default_device()
        elif self.device.startswith("cuda") and not device_probe.cuda_surely_visible(self.device):
            import torch

            if not torch.cuda.is_available():
                self.stopping.set()  # nothing to keep warm: the service goes
                return "no CUDA GPU here"  # the cold path says it in its words
        return None

    def _box(self, config: Any) -> Any:
        if self.box is None:
            from kevolve.sandbox.isolate.bwrap import IsolationUnavailable
            from kevolve.sandbox.parent.baselines import BaselineCache
            from kevolve.sandbox.parent.make import make_sandbox

            try:  # a problem's torch.compile baseline: the one `eval` and `bench` cache (timings only), or measured once
                self.box = make_sandbox(config, baselines=BaselineCache(config.cache_dir / "baselines"))
            except IsolationUnavailable as e:
                return str(e)
        return self.box

    def _seed_for(self, problem: Any, config: Any) -> tuple[str, int, bool]:
        """(what this request is, the seed its problem data is drawn with, whether that data was prepared ahead).
        A prepared problem serves the one evaluation it was prepared for: its seed is then forgotten."""
        match = json.dumps([problem.id, config.model_dump(mode="json", exclude={"seed", "policy_allow", "audit",
                                                                                  "allow_torch_only"}),
                            config.seed], sort_keys=True)
        if self.ahead is not None and self.ahead[0] == match:
            seed, self.ahead = self.ahead[1], None
            return match, seed, True
        self.ahead = None
        self.box.forget()  # whatever was prepared is for another problem or configuration
        return match, config.seed if config.seed is not None else _fresh_seed(), False

    def _prepare_next(self, problem: Any, config: Any, match: str) -> None:
        """Drop the problem data just used (no evaluation sees it again) and prepare the next one's."""
        from kevolve.contract import ProblemError
        from kevolve.sandbox.parent.local import JudgeLost

        self.box.forget()
        seed = config.seed if config.seed is not None else _fresh_seed()
        if self.stopping.is_set():
            return
        try:
            self.box.reference(problem, config.model_copy(update={"seed": seed}))
        except (ProblemError, JudgeLost) as e:
            log.warning("preparing %s ahead failed: %s", problem.name, e)
            return
        self.ahead = (match, seed)

    # ------------------------------------------------------------------ the process

    def serve(self, sock: socket.socket) -> None:
        sock.settimeout(1.0)
        while not self.stopping.is_set():
            try:
                conn, _ = sock.accept()
            except socket.timeout:
                if not self.active and not self.work.locked() and time.monotonic() - self.last > self.idle_s:
                    log.warning("idle for %.0f s: exiting", self.idle_s)
                    return
                continue
            conn.settimeout(None)
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()
        with self.work:  # a stop waits for the evaluation under way
            pass

    def close(self) -> None:
        if self.box is not None:
            self.box.close()


def _fresh_seed() -> int:
    return secrets.randbelow(2**31 - 1000)


def _write_private(path: Path, text: str) -> None:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _listen(files: ServiceFiles) -> socket.socket:
    files.socket.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(files.socket))
    os.chmod(files.socket, 0o600)
    sock.listen(16)
    return sock


def main() -> None:
    os.umask(0o077)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format=f"%(asctime)s warm {os.getpid()} %(message)s")
    d, digest, device, backend, isolation, idle = sys.argv[1:7]
    files = ServiceFiles(Path(d), digest)
    key = WarmKey.of(None if device == "default" else device, backend, isolation)
    if key.digest != digest:  # kevolve changed between the client's look and this start
        sys.exit(f"key mismatch: this installation is {key.digest}, asked for {digest}")
    lock = open(files.lock, "a")
    deadline = time.monotonic() + 5.0  # one of this key still exiting lets go of it within a second or two
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("another service holds this key")  # it answers instead
            time.sleep(0.1)
    from kevolve.sandbox.config import SandboxConfig

    if where := readable_by_runners(files.dir, SandboxConfig(device="cpu").cache_dir):
        sys.exit(f"refusing to start: {files.dir} is inside {where}, which a candidate's runner may read")
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    service = Service(files, key, float(idle))
    signal.signal(signal.SIGTERM, lambda *_: service.stopping.set())
    _write_private(files.token, service.token)
    _write_private(files.info, json.dumps({"pid": os.getpid(), "key": key.fields, "started": service.started}))
    sock = _listen(files)
    try:
        service.serve(sock)
    finally:
        sock.close()
        for p in (files.socket, files.token, files.info):
            p.unlink(missing_ok=True)
        service.close()
    os._exit(0)


if __name__ == "__main__":
    main()
