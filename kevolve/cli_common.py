"""What the `kevolve` commands share: the one-line failure, the --device check, --allow, and the
archive flags. Light at import (typer only): torch, the sandbox and the archive load inside functions.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import typer

from kevolve import defaults
from kevolve.languages import LANGUAGES

T = TypeVar("T")

# What works on a machine without an NVIDIA GPU (the main job needs one), said wherever a GPU is missing.
CPU_HINT = ("Without a GPU, what works here: kevolve optimize FILE --device cpu --llm PROVIDER:MODEL (an LLM writes "
            "C++ kernels), and kevolve eval / kevolve bench --device cpu for C++ candidates")
NO_GPU = f"no CUDA GPU is visible to PyTorch here. {CPU_HINT}"

LANGUAGE_HELP = (f"kernel language the prompts ask for: {', '.join(LANGUAGES)}; default: CuPy preferred on a GPU, "
                 "C++ on the CPU; a resumed run keeps its own")
def env_cache_dir() -> Path | None:
    """$KEVOLVE_CACHE_DIR (builds and baselines; what `optimize` already reads), None when unset: the sandbox's
    default (~/.cache/kevolve) then."""
    value = os.environ.get("KEVOLVE_CACHE_DIR", "").strip()
    return Path(value).expanduser().resolve() if value else None


SLOWDOWN_HELP = (f"stop a candidate whose calls take this many times the reference's (and over 0.5 s each; "
                 f"timeout: too_slow); 0 = never; default {defaults.MAX_SLOWDOWN:g}")
BASELINES_HELP = ("reuse this problem's torch.compile timing cached on this device and torch version (as bench does), or "
                  "live: measure it again")
ALLOW_HELP = ("permit a candidate-policy category (repeatable): introspection, monkeypatch, process_setting, "
              "environment, network, processes, threads, files, exit, native, import, or all")


def fail(msg: str, code: int = 2) -> NoReturn:
    """End the command with one `error: …` line on stderr (exit code 2: bad usage, unless told)."""
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def or_fail(parse: Callable[..., T], *args: object) -> T:
    """`parse(*args)`, a bad flag (SettingsError) ending the command in one line."""
    from kevolve.agent.settings import SettingsError

    try:
        return parse(*args)
    except SettingsError as e:
        fail(str(e))


def gpu_indices(gpus: str, visible: bool = True) -> tuple[int, ...]:
    """`--gpus 0,1` as distinct indices, with `visible` each one on this machine (optimize and bench alike);
    ValueError with one line otherwise."""
    try:
        lanes = tuple(int(g) for g in gpus.split(",") if g.strip())
    except ValueError:
        raise ValueError(f"--gpus takes GPU indices like 0,1, not {gpus!r}") from None
    if not lanes or min(lanes) < 0 or len(set(lanes)) != len(lanes):
        raise ValueError(f"--gpus takes distinct GPU indices like 0,1, not {gpus!r}")
    if not visible:
        return lanes
    from kevolve.sandbox.parent.device_probe import cuda_surely_visible

    if not all(cuda_surely_visible(f"cuda:{g}") for g in lanes):  # the driver's list cannot say: ask torch
        import torch

        if max(lanes) >= torch.cuda.device_count():
            raise ValueError(f"--gpus {gpus}: this machine has {torch.cuda.device_count()} GPU(s)")
    return lanes


def default_device() -> str:
    """cuda if PyTorch sees a GPU, else cpu (sandbox/config.py: without importing a CPU-only PyTorch)."""
    from kevolve.sandbox.parent.device_probe import default_device as device

    return device()


def device_syntax_problem(dev: str) -> str | None:
    """Why `--device dev` is not a device name (cuda, cuda:N or cpu); None if it is. Imports nothing."""
    if not (dev == "cpu" or dev == "cuda" or (dev.startswith("cuda:") and dev[5:].isdigit())):
        return f"--device must be cuda, cuda:N or cpu, not {dev!r}"
    return None


def device_problem(dev: str) -> str | None:
    """Why `--device dev` cannot be used here (not cuda, cuda:N or cpu; or CUDA without a GPU); None if it can."""
    if why := device_syntax_problem(dev):
        return why
    if dev.startswith("cuda"):
        from kevolve.sandbox.parent.device_probe import cuda_surely_visible

        if cuda_surely_visible(dev):  # the driver lists the GPU: no need to import torch here to ask
            return None
        import torch

        if not torch.cuda.is_available():
            return f"--device {dev}: {NO_GPU}"
    return None


def check_compile_baseline(value: str) -> None:
    """--compile-baseline auto|on|off, else a one-line failure."""
    from kevolve.sandbox.config import CompileBaseline

    if value not in {c.value for c in CompileBaseline}:
        fail(f"--compile-baseline must be auto, on or off, not {value!r}")


def parse_allow(values: list[str] | None) -> tuple[str, ...]:
    """--allow CATEGORY (repeatable) as SandboxConfig.policy_allow; SettingsError for an unknown one."""
    from kevolve.agent.settings import SettingsError
    from kevolve.sandbox.policy.candidate import UnknownCategory, validate_allow

    try:
        validate_allow(values or ())
    except UnknownCategory as e:
        raise SettingsError(f"--allow: {e}") from None
    return tuple(dict.fromkeys(values or ()))


def ingest_mode(flag: str | None, no_archive: bool):  # noqa: ANN201 - an IngestMode (imported lazily)
    """--archive-ingest, defaulting to all (none with --no-archive); SettingsError for a bad value."""
    from kevolve.agent.settings import SettingsError
    from kevolve.archive.ingest import IngestMode, parse_mode

    if flag is None:
        return IngestMode.NONE if no_archive else IngestMode.ALL
    try:
        return parse_mode(flag)
    except ValueError as e:
        raise SettingsError(str(e)) from None


def sqlite_file(url: str) -> Path | None:
    """The file a sqlite:/// URL names; None for another database, an in-memory one, or a malformed URL (left
    to the archive's own one-line error)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        u = make_url(url)
    except ArgumentError:
        return None
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database).expanduser()


def check_db_path(url: str, given: bool, reading: bool, flag: str = "--db") -> None:
    """Refuse, in one line (exit 2), a SQLite archive that would be created by mistake. A command that only reads
    never creates one: the file must exist. A command that writes creates the file, but the folders of a URL the
    user gave (the flag or $KEVOLVE_DB) must exist, so a mistyped path is an error rather than new folders and an
    empty archive somewhere else; the default home (~/.kevolve) is kevolve's own to create."""
    path = sqlite_file(url)
    if path is None:
        return
    if given and not path.parent.is_dir():
        fail(f"cannot open the archive at {url}: no such folder {path.parent} (check {flag}, or create the folder)")
    if reading and not path.is_file():
        where = "" if given else " yet (kevolve optimize, bench and archive import fill it)"
        fail(f"no archive at {path}{where}")


def check_archive(db: str | None, ingest: object, retrieve: bool) -> str | None:
    """The archive URL (flag, else $KEVOLVE_DB / $KEVOLVE_HOME), opened now when ingest is on, so that an
    unreachable database is one line here rather than a failure mid-run. Exits 2 on error."""
    from kevolve.archive.ingest import IngestMode

    if ingest is IngestMode.NONE and not retrieve:
        return None
    try:
        from kevolve.archive import open_archive
        from kevolve.archive.db import ArchiveError, default_url
    except ImportError as e:  # a partial install: the run goes on without the archive
        from kevolve.extras import install_hint

        if db:
            fail(f"--archive-db: {install_hint(e.name or '')}")
        return None
    url = db or default_url(dict(os.environ))
    if ingest is not IngestMode.NONE:  # retrieval alone never creates an archive and skips a broken one
        check_db_path(url, bool(db or os.environ.get("KEVOLVE_DB")), reading=False, flag="--archive-db")
        try:
            open_archive(url)
        except ArchiveError as e:
            fail(f"{e} (or --archive-ingest none)")
    return url
