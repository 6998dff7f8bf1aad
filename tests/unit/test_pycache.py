"""Runner bytecode (sandbox/isolate/pycache.py): primed once by a process that runs no candidate code, then
read by every runner and written by none."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kevolve.sandbox.isolate import pycache


@pytest.fixture(scope="module")
def primed_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real priming for the module (it compiles all of torch's bytecode: ~15-45 s on CI's 2 cores)."""
    before = pycache._ACTIVE, pycache._DIGEST
    where = pycache.prime(tmp_path_factory.mktemp("primed-once"))
    pycache._ACTIVE, pycache._DIGEST = before  # each test takes up its own copy
    assert where is not None
    return where


@pytest.fixture()
def primed(primed_once, tmp_path, monkeypatch):  # noqa: ANN001, ANN201
    """Each test's own prefix: a copy of the module's priming (paths, contents and times), taken up by
    `prime` through its marker as a prefix primed by an earlier run is; a test may write its copy."""
    monkeypatch.setattr(pycache, "_ACTIVE", None)
    monkeypatch.setattr(pycache, "_FROM", None)
    shutil.copytree(primed_once.parent.parent, tmp_path, dirs_exist_ok=True, symlinks=True)
    where = pycache.prime(tmp_path)
    assert where == tmp_path / primed_once.relative_to(primed_once.parent.parent)
    yield where
    monkeypatch.setattr(pycache, "_ACTIVE", None)


def test_priming_writes_the_runners_bytecode_once_and_marks_it(primed: Path) -> None:
    import torch

    assert (primed / ".primed").read_text().strip() == pycache.digest(primed)
    torch_dir = primed / Path(torch.__file__).parent.relative_to("/")  # PREFIX/<source folder>/<name>.<tag>.pyc
    assert (torch_dir / f"__init__.{sys.implementation.cache_tag}.pyc").exists(), "no torch bytecode in the prefix"
    assert list(primed.rglob("runner.*.pyc")), "kevolve's runner module is not in the prefix"
    before = {p: p.stat().st_mtime_ns for p in primed.rglob("*.pyc")}
    assert pycache.prime(primed.parent.parent) == primed  # the marker: nothing compiled again
    assert {p: p.stat().st_mtime_ns for p in primed.rglob("*.pyc")} == before


def test_runners_get_the_prefix_read_only(primed: Path, tmp_path: Path) -> None:
    from kevolve.sandbox.isolate.bwrap import bwrap_argv
    from kevolve.sandbox.isolate.launch import scrubbed_env

    env = scrubbed_env("cpu", tmp_path)
    assert env["PYTHONPYCACHEPREFIX"] == str(primed) and env["PYTHONDONTWRITEBYTECODE"] == "1"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = bwrap_argv(scratch)
    i = argv.index("bwrap")
    ro = {argv[j + 1] for j in range(i, len(argv) - 1) if argv[j] == "--ro-bind"}
    rw = {argv[j + 1] for j in range(i, len(argv) - 1) if argv[j] == "--bind"}
    assert str(primed) in ro and str(primed) not in rw


def test_a_runner_under_bubblewrap_cannot_write_the_prefix(primed: Path, tmp_path: Path) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    from kevolve.sandbox.isolate.bwrap import bwrap_argv
    from kevolve.sandbox.isolate.launch import scrubbed_env

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    target = next(primed.rglob("*.pyc"))
    code = f"open({str(target)!r}, 'r+b').write(b'x')"
    done = subprocess.run([*bwrap_argv(scratch), sys.executable, "-c", code], env=scrubbed_env("cpu", scratch),
                          capture_output=True, text=True, timeout=60)
    if "setting up uid map" in done.stderr or "No permissions to creat" in done.stderr:
        pytest.skip(f"bubblewrap cannot run here: {done.stderr.strip()[:120]}")
    assert done.returncode != 0 and "Read-only file system" in done.stderr


def test_a_failed_priming_leaves_runners_compiling_as_before(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(pycache, "_ACTIVE", None)
    monkeypatch.setattr(pycache, "PRIME", "raise SystemExit('no torch here')")
    assert pycache.prime(tmp_path) is None
    assert pycache.env() == {} and pycache.active() is None


def test_a_written_prefix_is_seen_even_with_its_times_put_back_and_primed_again(primed: Path) -> None:
    import os

    assert not pycache.changed()
    target = next(primed.rglob("*.pyc"))
    st = target.stat()
    data = target.read_bytes()
    target.write_bytes(data[:16] + b"\0" * 8 + data[24:])  # same size
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back; the change time moves anyway
    assert pycache.changed()
    assert pycache.active() == primed and target.read_bytes() == data  # primed again, as before
    assert not pycache.changed()


def test_priming_replaces_a_prefix_whose_contents_changed_between_runs(primed: Path) -> None:
    target = next(primed.rglob("*.pyc"))
    data = target.read_bytes()
    target.write_bytes(data[:-8] + b"\0" * 8)
    assert pycache.prime(primed.parent.parent) == primed
    assert target.read_bytes() == data


def test_prefixes_of_other_installations_unused_for_two_weeks_are_removed(primed: Path) -> None:
    """Each kevolve/torch/interpreter combination primes its own 60 MB prefix; nothing removed old ones (six on one
    VM in a day). A prefix is marked used beside it each time a judge takes it up; others unused 14 days go."""
    import os
    import time

    old, recent = primed.parent / "cpython-0-old", primed.parent / "cpython-0-recent"
    for d in (old, recent):  # copies of a real priming, as another installation leaves one
        shutil.copytree(primed, d, symlinks=True)
    assert pycache.prime(primed.parent.parent) == primed  # marks its siblings' use: none yet, so their markers count
    marks = {d: d.parent / f"{d.name}.used" for d in (old, recent)}
    for d, mark in marks.items():
        mark.touch()
    past = time.time() - pycache.STALE_S - 3600
    os.utime(marks[old], (past, past))
    assert pycache.prime(primed.parent.parent) == primed
    assert not old.exists() and not marks[old].exists()
    assert recent.is_dir() and (primed / ".primed").exists() and (primed.parent / f"{primed.name}.used").exists()
    assert not pycache.changed()  # the mark beside the prefix is no write inside it


def test_a_judge_takes_up_its_own_copy_and_is_blamed_only_for_writes_to_it(primed: Path, tmp_path: Path) -> None:
    """The prefix was one per installation, shared by every judge of the user: a candidate writing it in one judge
    (or that judge priming it again) got an honest candidate evaluated meanwhile in another judge rejected for
    tampering (the adversarial suite under none on two workers: 12 such). A judge without a sandbox copies it."""
    own = tmp_path / "judge"
    own.mkdir()
    copy = pycache.prime(primed.parent.parent, private=own)
    assert copy == own / primed.name and pycache.active() == copy and pycache.env()[pycache.VAR] == str(copy)
    assert pycache.digest(copy) == (primed / ".primed").read_text().strip()
    # another judge's candidate writes the shared prefix: not this judge's candidate's doing
    shared = next(primed.rglob("*.pyc"))
    data = shared.read_bytes()
    shared.write_bytes(data[:16] + b"\0" * 8 + data[24:])
    assert not pycache.changed()
    shared.write_bytes(data)
    # this judge's candidate writes its own copy: seen, and a fresh copy taken up (the shared prefix as primed)
    mine = copy / shared.relative_to(primed)
    mine.write_bytes(data[:16] + b"\0" * 8 + data[24:])
    assert pycache.changed()
    assert pycache.active() == copy and mine.read_bytes() == data and not pycache.changed()


def test_a_copy_of_a_shared_prefix_written_meanwhile_is_not_taken_up(primed: Path, tmp_path: Path) -> None:
    target = next(primed.rglob("*.pyc"))
    data = target.read_bytes()
    target.write_bytes(data[:16] + b"\0" * 8 + data[24:])  # after its marker was checked, before the copy
    assert pycache._copy(primed, tmp_path) is None and not (tmp_path / primed.name).exists()
    target.write_bytes(data)
    assert pycache._copy(primed, tmp_path) == tmp_path / primed.name


def test_a_bytecode_file_of_the_shared_prefix_linked_elsewhere_is_not_as_primed(primed: Path, tmp_path: Path) -> None:
    """An attack on the copy: a file of the shared prefix replaced by a link to the same bytes elsewhere (a digest
    that read through links matched), to be written there once a judge took up a copy holding the link (its
    `stamps` look at the link, not through it). A link is nothing priming makes: not copied, primed again."""
    target = next(primed.rglob("*.pyc"))
    elsewhere = tmp_path / "elsewhere.pyc"
    shutil.copyfile(target, elsewhere)
    target.unlink()
    target.symlink_to(elsewhere)
    assert pycache.digest(primed) != (primed / ".primed").read_text().strip()
    assert pycache._copy(primed, tmp_path / "judge") is None
