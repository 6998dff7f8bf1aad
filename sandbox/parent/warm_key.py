"""The warm judge service's key and its private folder: what both its client (`kevolve eval`) and the service
process agree on. Runs in the parent zone (never imports torch or candidate code); light at import.

A service is keyed by everything that changes how its judge behaves: kevolve's source, the interpreter and
torch, the device, the backend and isolation, and the environment the judge and its runners inherit (secrets
and a terminal's own variables left out). Another key is another service, never a stale one answering.

Its files live in one private folder of the user (`service_dir`): `$KEVOLVE_WARM_DIR`, else
`$XDG_RUNTIME_DIR/kevolve-warm`, else `~/.local/state/kevolve/warm`, created 0700 and refused when another user
owns it or others may enter it. None of these is in the view a runner may read (sandbox/isolate/view.py), which
the service checks again before it starts (`readable_by_runners`).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

DIR_ENV = "KEVOLVE_WARM_DIR"  # the service's private folder (tests; a machine without XDG_RUNTIME_DIR)
SWITCH_ENV = "KEVOLVE_WARM"  # 0/off/no: every `kevolve eval` cold, as with --no-warm
IDLE_ENV = "KEVOLVE_WARM_IDLE_S"  # seconds a service waits for its next evaluation before it exits
HANG_ENV = "KEVOLVE_WARM_HANG_S"  # seconds of silence after which the client calls a service hung
DEFAULT_IDLE_S = 600.0
DEFAULT_HANG_S = 20.0  # the service says it is alive every HEARTBEAT_S, queued or working
HEARTBEAT_S = 2.0
SOCKET_MAX = 107  # bytes of a unix socket path (sun_path), its terminating NUL aside

# Variables that say where a terminal or a test is, not how a judge behaves: a new shell window must find the
# same service. The service's own switches are the client's business.
_VOLATILE = {"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES", "TERM", "COLORTERM", "WINDOWID", "PS1", "PS2",
             "PROMPT_COMMAND", "LS_COLORS", "MAIL", "DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS", "STY",
             "HISTFILE", "HISTSIZE", "HISTCONTROL", "LESS", "LESSOPEN", "LESSCLOSE", "PAGER", "EDITOR", "VISUAL",
             "OLDPWD", "INSIDE_EMACS", "VTE_VERSION", "GPG_TTY", DIR_ENV, SWITCH_ENV, IDLE_ENV, HANG_ENV}
_VOLATILE_PREFIXES = ("TERM_", "TMUX", "XDG_SESSION_", "XDG_VTNR", "PYTEST_", "SSH_", "LC_TERMINAL")
# kevolve's own variables that no judge reads (the archive's, the LLM's, the terminal width): not the service's
_NOT_THE_JUDGES = ("KEVOLVE_DB", "KEVOLVE_HOME", "KEVOLVE_LLM_", "KEVOLVE_API_", "KEVOLVE_COLUMNS")


class WarmUnavailable(Exception):
    """No warm service can answer this evaluation (the reason is one line); `kevolve eval` then runs cold."""


def service_env() -> dict[str, str]:
    """The environment a service starts with: the caller's, less secrets and cloud credentials (the judge
    drops them again for itself and its runners), kevolve's own variables kept (they configure the sandbox)."""
    from kevolve.sandbox.isolate.launch import _CLOUD_PREFIXES, _SECRET_RE

    drop = tuple(p for p in _CLOUD_PREFIXES if p != "KEVOLVE_") + _NOT_THE_JUDGES
    return {k: v for k, v in os.environ.items()
            if not _SECRET_RE.search(k) and not k.upper().startswith(drop)}


def _judge_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items())
            if k not in _VOLATILE and not k.startswith(_VOLATILE_PREFIXES)}


def source_digest() -> str:
    """A hash of kevolve's own sources that a judge and its runners import (an edit means another service)."""
    import importlib.util

    h = hashlib.blake2b(digest_size=16)
    for name in ("kevolve", "kevolve.sandbox"):
        spec = importlib.util.find_spec(name)
        for root in (spec.submodule_search_locations or []) if spec else []:
            for p in sorted(Path(root).rglob("*.py")):
                try:
                    h.update(str(p).encode() + b"\0" + p.read_bytes() + b"\0")
                except OSError:
                    continue
    return h.hexdigest()


def _torch_stamp() -> str:
    """torch's version and place, read without importing it (that alone costs a second or two)."""
    import importlib.metadata
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
        return f"{importlib.metadata.version('torch')} {spec.origin if spec else ''}"
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return ""


@dataclass(frozen=True)
class WarmKey:
    """What a service is started with; `digest` names its files."""

    fields: dict[str, object]

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.fields, sort_keys=True).encode()).hexdigest()[:20]

    @property
    def device(self) -> str:
        return str(self.fields["device"])

    @classmethod
    def of(cls, device: str | None, backend: str, isolation: str) -> WarmKey:
        """The key of a service for these flags, from this process's installation and environment."""
        import kevolve

        return cls({"kevolve": getattr(kevolve, "__version__", ""), "source": source_digest(),
                    "python": f"{sys.executable} {sys.version}", "torch": _torch_stamp(), "uid": os.getuid(),
                    "device": device or "default", "backend": backend, "isolation": isolation,
                    "env": _judge_env(service_env())})


def service_dir() -> Path:
    """The user's private folder for services (created 0700); WarmUnavailable if it cannot be trusted."""
    given = os.environ.get(DIR_ENV, "").strip()
    runtime = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if given:
        d = Path(given).expanduser()
    elif runtime and Path(runtime).is_dir():
        d = Path(runtime) / "kevolve-warm"
    else:
        d = Path.home() / ".local" / "state" / "kevolve" / "warm"
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = d.lstat()
    except OSError as e:
        raise WarmUnavailable(f"cannot create {d}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise WarmUnavailable(f"{d} is not a folder of this user")
    if st.st_mode & 0o077:
        raise WarmUnavailable(f"{d} may be entered by other users (mode {stat.S_IMODE(st.st_mode):o}; chmod 700 it)")
    return d


@dataclass(frozen=True)
class ServiceFiles:
    """One service's files in the private folder."""

    dir: Path
    digest: str

    def _p(self, suffix: str) -> Path:
        return self.dir / f"{self.digest}{suffix}"

    @property
    def socket(self) -> Path:
        return self._p(".sock")

    @property
    def token(self) -> Path:
        return self._p(".token")

    @property
    def info(self) -> Path:  # the key and the pid, for `kevolve sandbox warm-status` and a restart
        return self._p(".json")

    @property
    def lock(self) -> Path:  # held by the service for its whole life: one service per key
        return self._p(".lock")

    @property
    def log(self) -> Path:
        return self._p(".log")

    @property
    def spawn_lock(self) -> Path:  # held by a client while it starts a service (two clients start one)
        return self._p(".spawn")

    def check_socket_path(self) -> None:
        if len(os.fsencode(self.socket)) > SOCKET_MAX:
            raise WarmUnavailable(f"the socket path {self.socket} is longer than a unix socket's {SOCKET_MAX} bytes")


def all_services(d: Path) -> list[ServiceFiles]:
    """Every service whose files are in `d` (running or not)."""
    return [ServiceFiles(d, p.stem) for p in sorted(d.glob("*.json"))]


def read_info(files: ServiceFiles) -> dict[str, object]:
    try:
        data = json.loads(files.info.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def readable_by_runners(d: Path, cache_dir: Path) -> str | None:
    """The path of the runner's view that holds `d` (a candidate could read the service's token there), else None."""
    from kevolve.sandbox.isolate import landlock, pycache

    d = d.resolve()
    for p in [*landlock.runner_reads(), cache_dir, pycache.default_root()]:
        try:
            root = Path(p).resolve()
        except OSError:
            continue
        if d == root or root in d.parents:
            return str(root)
    return None


__all__ = ["DEFAULT_HANG_S", "DEFAULT_IDLE_S", "DIR_ENV", "HANG_ENV", "HEARTBEAT_S", "IDLE_ENV", "SWITCH_ENV",
           "ServiceFiles", "WarmKey", "WarmUnavailable", "all_services", "read_info", "readable_by_runners",
           "service_dir", "service_env", "source_digest"]
