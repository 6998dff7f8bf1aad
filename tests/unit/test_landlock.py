"""landlock.confine in a real child process: reads and writes land only where it allows, for good."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kevolve.sandbox.isolate import landlock

pytestmark = pytest.mark.skipif(landlock.abi() <= 0, reason="this kernel has no Landlock")

CHILD = r"""
import os, subprocess, sys
from pathlib import Path
from kevolve.sandbox.isolate import landlock
ok, no = Path(sys.argv[1]), Path(sys.argv[2])
print("confined:" + landlock.confine([ok]))
def tries(what, fn):
    try:
        fn(); print(what, "yes")
    except OSError as e:
        print(what, "no", e.errno)
tries("write-inside", lambda: (ok / "a").write_text("x"))
tries("mkdir-inside", lambda: (ok / "d").mkdir())
tries("write-outside", lambda: (no / "b").write_text("x"))
tries("change-outside", lambda: open(no / "old", "a").write("x"))
tries("rename-out", lambda: os.rename(ok / "a", no / "a"))
tries("remove-outside", lambda: os.unlink(no / "old"))
tries("dev-null", lambda: open("/dev/null", "w").write("x"))
tries("read-outside", lambda: (no / "old").read_text())
r = subprocess.run(["sh", "-c", f"echo x > {no}/c"], capture_output=True)
print("child-write", "yes" if r.returncode == 0 else "no", r.returncode)
parent = int(sys.argv[3])
import signal
tries("signal-parent", lambda: os.kill(parent, signal.SIGCONT))
tries("signal-self", lambda: os.kill(os.getpid(), 0))
tries("parent-memory", lambda: open(f"/proc/{parent}/mem", "rb").close())
"""


def test_writes_land_only_under_the_allowed_folders_and_children_inherit_it(tmp_path: Path) -> None:
    ok, no = tmp_path / "ok", tmp_path / "no"
    ok.mkdir()
    no.mkdir()
    (no / "old").write_text("before")
    out = subprocess.run([sys.executable, "-c", CHILD, str(ok), str(no), str(os.getpid())], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert out.stdout.startswith("confined:\n"), out.stdout
    for what in ("write-inside", "mkdir-inside", "dev-null", "read-outside"):
        assert got[what] == "yes", (what, out.stdout)
    for what in ("write-outside", "change-outside", "rename-out", "remove-outside", "child-write", "parent-memory"):
        assert got[what].startswith("no"), (what, out.stdout)  # tracing (and /proc/PID/mem) out of its domain
    assert got["signal-self"] == "yes"
    if landlock.abi() >= 6:  # signals scoped to its own domain: the judge and the reference are out of reach
        assert got["signal-parent"].startswith("no"), out.stdout
    assert (no / "old").read_text() == "before" and not (no / "b").exists() and not (no / "c").exists()
    # the parent (this test) is not confined
    (no / "after").write_text("x")


@pytest.mark.parametrize(("kw", "launcher", "confined"), [
    ({}, None, True),  # a CPU runner without a sandbox
    ({"confine_writes": "off"}, None, False),
    ({"device": "cuda"}, None, True),  # auto: GPU runners too (tests/gpu under isolation none, H100 2026-11-27)
    ({"device": "cuda", "confine_writes": "off"}, None, False),
    ({"device": "cuda", "confine_writes": "on"}, None, True),
    ({"backend": "docker"}, None, False),  # a container's runner: its own image and volumes
    ({}, object(), False),  # under bubblewrap: its mounts already confine it
])
def test_which_runners_confine_their_writes(tmp_path: Path, kw: dict, launcher: object, confined: bool) -> None:
    from types import SimpleNamespace

    from kevolve.sandbox.config import SandboxConfig
    from kevolve.sandbox.judge.serve import Judge

    config = SandboxConfig.model_validate({"device": "cpu", "cache_dir": tmp_path / "cache", **kw})
    runner = SimpleNamespace(launcher=launcher, scratch=tmp_path / "scratch", build_path=None, host_cache=None)
    assert Judge._confine(runner, config) is confined  # type: ignore[arg-type]
    if confined:  # its builds go to its own scratch, promoted into the cache once it is gone
        assert runner.build_path == str(tmp_path / "scratch" / "build")
        assert runner.host_cache == (tmp_path / "cache").resolve()
    else:
        assert runner.build_path is None


def test_a_runner_may_open_only_the_harmless_device_nodes_and_never_a_disk() -> None:
    """Red team 3 read the root file system's disk (/dev/vda) through a rule on every /dev entry; the rules now name
    bubblewrap's minimal /dev (and the GPU's nodes), never a block device, /dev/shm or a terminal."""
    import stat

    nodes = landlock.devices()
    assert {p.name for p in nodes} <= {"null", "zero", "full", "random", "urandom"} | {
        p.name for p in nodes if p.name.startswith("nvidia")}
    assert Path("/dev/null") in nodes and not any(stat.S_ISBLK(p.stat().st_mode) for p in nodes)


def test_the_launcher_confines_the_command_it_runs_without_importing_kevolve(tmp_path: Path) -> None:
    """launcher(): the policy's preprocessor and the build service run their tools through it. The command may read
    and write under its folder and read what it is given; a file beside them stays unreadable and unwritable."""
    import subprocess

    work, given, outside = tmp_path / "work", tmp_path / "given", tmp_path / "outside"
    for d in (work, given, outside):
        d.mkdir()
    (given / "in.txt").write_text("given")
    (outside / "secret.txt").write_text("secret")
    script = (f"cat {given / 'in.txt'} > {work / 'copy.txt'}; cat {outside / 'secret.txt'} > {work / 'leak.txt'}; "
              f"echo x > {outside / 'planted.txt'}; true")
    argv = [*landlock.launcher(work, (given,)), "/bin/sh", "-c", script]
    assert "-I" in argv and "-S" in argv and "-m" not in argv  # a plain script: no site, no package import
    subprocess.run(argv, cwd=work, check=True, capture_output=True, timeout=60)
    assert (work / "copy.txt").read_text() == "given"
    assert (work / "leak.txt").read_text() == "" and not (outside / "planted.txt").exists()
