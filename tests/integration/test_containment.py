"""Everything a worker starts dies with it: real workers that leave processes behind, every way.

The worker here is `escaper.py` (a double-forked `setsid` daemon, `Popen(start_new_session=True)`,
a `setsid` child forking in a loop), started by the real `WorkerProcess` under each containment
kind and each launcher. After `kill()` none of those processes may exist, looked up by the pid
each one had and by the marker in its argv; the test process's own, unrelated children (in its
session, in a session of their own, and a daemon re-parented to it) must all survive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from testpaths import unavailable

from kevolve.sandbox.isolate import cgroups, procfs
from kevolve.sandbox.isolate.containment import ContainmentKind
from kevolve.sandbox.isolate.launch import WorkerProcess

ESCAPER = (Path(__file__).parent / "escaper.py").read_text()
CGROUP, SUBREAPER, GROUP = ContainmentKind.CGROUP, ContainmentKind.SUBREAPER, ContainmentKind.PROCESS_GROUP


def marked(mark: str) -> list[int]:
    """Pids of the live processes whose argv carries `mark` (zombies have none)."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and mark in procfs.cmdline(int(p))]


def eventually(check: Callable[[], bool], limit_s: float = 3.0) -> bool:
    """The kernel finishes killing a PID namespace a moment after its first process is reaped."""
    deadline = time.monotonic() + limit_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def alive(p: procfs.ProcStat) -> bool:
    now = procfs.read_stat(p.pid)
    return now is not None and now.start == p.start and now.state != "Z"


def require(kind: ContainmentKind) -> None:
    if kind is CGROUP and isinstance(home := cgroups.home(), cgroups.Unavailable):
        unavailable(f"cgroup v2: {home.reason}")


def launcher_for(name: str) -> object | None:
    if name == "none":
        return None
    from kevolve.sandbox.isolate.bwrap import BwrapLauncher, probe

    works, why = probe()
    if not works:
        unavailable(why)
    return BwrapLauncher(device="cpu")


def start_escaper(kind: ContainmentKind, launcher: object | None, mode: str = "stay") -> tuple[WorkerProcess, str]:
    mark = f"kevolve-escaper-{uuid.uuid4().hex}"
    worker = WorkerProcess("cpu", launcher=launcher, containment=kind)  # type: ignore[arg-type]
    worker.spawn([sys.executable, "-c", ESCAPER, mark, mode])
    deadline = time.monotonic() + 60
    while not (worker.scratch / "ready").exists():
        assert worker.proc is not None
        if worker.proc.poll() is not None and not (worker.scratch / "ready").exists():
            pytest.fail(f"escaper died: {(worker.scratch / 'worker.log').read_text()}")
        assert time.monotonic() < deadline, "escaper never got ready"
        time.sleep(0.05)
    return worker, mark


def escaped(worker: WorkerProcess) -> list[procfs.ProcStat]:
    """The processes the escaper recorded, as this process sees them (meaningful without bwrap)."""
    pids = [int(x) for x in (worker.scratch / "pids").read_text().split()]
    return [p for p in map(procfs.read_stat, pids) if p is not None]


@pytest.fixture
def cleanup() -> Iterator[list[str]]:
    """Marks whose processes the test kills by pid afterwards, whatever happened."""
    marks: list[str] = []
    yield marks
    deadline = time.monotonic() + 10
    while (left := [pid for mark in marks for pid in marked(mark)]) and time.monotonic() < deadline:
        for pid in left:  # again and again: a forking loop may have forked since the last look
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


CASES = [("none", CGROUP, "stay"), ("none", CGROUP, "exit"), ("none", SUBREAPER, "stay"),
         ("none", SUBREAPER, "exit"), ("bwrap", CGROUP, "stay"), ("bwrap", SUBREAPER, "stay"),
         ("bwrap", GROUP, "stay")]


@pytest.mark.parametrize(("launcher", "kind", "mode"), CASES, ids=["-".join(c) for c in CASES])
def test_nothing_a_worker_started_survives_its_kill(launcher: str, kind: ContainmentKind, mode: str,
                                                    cleanup: list[str]) -> None:
    """`exit`: the worker ended on its own first (the incident's path: kill() found it gone)."""
    require(kind)
    worker, mark = start_escaper(kind, launcher_for(launcher), mode)
    cleanup.append(mark)
    recorded = escaped(worker) if launcher == "none" else []
    assert len(marked(mark)) >= 4 and (launcher != "none" or len(recorded) == 3)
    worker.kill()
    assert eventually(lambda: not marked(mark)), [procfs.cmdline(p)[:80] for p in marked(mark)]
    assert not [p for p in recorded if alive(p)]


def test_a_process_group_kill_alone_lets_setsid_daemons_escape(cleanup: list[str]) -> None:
    """The incident, without bubblewrap: why the other kinds exist (and that the checks above can fail)."""
    worker, mark = start_escaper(GROUP, None)
    cleanup.append(mark)
    worker.kill()
    time.sleep(0.2)
    assert len(marked(mark)) >= 3
    assert all(alive(p) for p in escaped(worker))


DAEMONIZER = textwrap.dedent("""
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open(sys.argv[2], "w").write(str(os.getpid()))
            while True:
                time.sleep(1)
        os._exit(0)
    """)


@pytest.mark.parametrize("kind", [CGROUP, SUBREAPER], ids=str)
def test_the_spawners_other_children_survive_a_workers_kill(kind: ContainmentKind, cleanup: list[str],
                                                            tmp_path: Path) -> None:
    require(kind)
    legit = f"kevolve-legit-{uuid.uuid4().hex}"
    cleanup.append(legit)
    forever = [sys.executable, "-c", "import time\nwhile True: time.sleep(1)", legit]
    same_session = subprocess.Popen(forever)
    own_session = subprocess.Popen(forever, start_new_session=True)
    other, other_mark = start_escaper(kind, None)  # another lane's worker, still running
    cleanup.append(other_mark)
    worker, mark = start_escaper(kind, None)
    cleanup.append(mark)
    # A daemon of the test's own (a database server started by pg_ctl, say): re-parented to the
    # test process when that is a subreaper, and not any worker's.
    subprocess.run([sys.executable, "-c", DAEMONIZER, legit, str(tmp_path / "daemon")], check=True)
    assert eventually(lambda: (tmp_path / "daemon").exists())
    daemon = procfs.read_stat(int((tmp_path / "daemon").read_text()))
    assert daemon is not None and (kind is not SUBREAPER or daemon.ppid == os.getpid())  # the hard case
    others = marked(other_mark)
    try:
        worker.kill()
        assert eventually(lambda: not marked(mark))
        assert same_session.poll() is None and own_session.poll() is None
        assert alive(daemon)
        assert set(others) <= set(marked(other_mark))
    finally:
        other.kill()
        for p in (same_session, own_session):
            p.kill()
            p.wait()
    assert eventually(lambda: not marked(other_mark))
    if procfs.signal_exact(daemon, signal.SIGKILL):
        time.sleep(0.1)
        procfs.reap(daemon.pid)  # ours to reap when the test process is a subreaper


ORCHESTRATOR = textwrap.dedent("""
    import sys, time
    from kevolve.sandbox.isolate.containment import ContainmentKind
    from kevolve.sandbox.isolate.launch import WorkerProcess
    escaper, mark, kind, then = sys.argv[1:5]
    w = WorkerProcess("cpu", containment=ContainmentKind(kind)).spawn([sys.executable, "-c", escaper, mark, "stay"])
    while not (w.scratch / "ready").exists():
        time.sleep(0.05)
    print(w.proc.pid, flush=True)
    if then == "hang":
        time.sleep(300)
    """)


@pytest.mark.parametrize("kind", [CGROUP, SUBREAPER], ids=str)
def test_workers_left_running_at_the_orchestrators_exit_take_everything_with_them(
        kind: ContainmentKind, cleanup: list[str]) -> None:
    require(kind)
    mark = f"kevolve-escaper-{uuid.uuid4().hex}"
    cleanup.append(mark)
    r = subprocess.run([sys.executable, "-c", ORCHESTRATOR, ESCAPER, mark, kind.value, "exit"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert eventually(lambda: not marked(mark)), [procfs.cmdline(p)[:80] for p in marked(mark)]


FORKING_ORCHESTRATOR = textwrap.dedent("""
    import os, sys, time
    from kevolve.sandbox.isolate.launch import WorkerProcess
    escaper, mark = sys.argv[1:3]
    w = WorkerProcess("cpu").spawn([sys.executable, "-c", escaper, mark, "stay"])
    while not (w.scratch / "ready").exists():
        time.sleep(0.05)
    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # an ordinary exit: atexit handlers run in the child
    os.waitpid(pid, 0)
    print("alive" if w.proc.poll() is None else "killed", flush=True)
    w.kill()
    """)


def test_a_forked_child_of_the_orchestrator_does_not_kill_its_workers_when_it_exits(cleanup: list[str]) -> None:
    mark = f"kevolve-escaper-{uuid.uuid4().hex}"
    cleanup.append(mark)
    r = subprocess.run([sys.executable, "-c", FORKING_ORCHESTRATOR, ESCAPER, mark],
                       capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "alive", r.stdout + r.stderr
    assert eventually(lambda: not marked(mark))


def test_an_orchestrator_killed_outright_loses_its_worker_and_the_next_one_sweeps_the_rest(
        cleanup: list[str]) -> None:
    """SIGKILL runs no clean-up: the worker dies by its parent-death signal, its daemons stay in
    their cgroup until the next orchestrator's sweep finds the owner gone."""
    require(CGROUP)
    home = cgroups.home()
    assert isinstance(home, cgroups.CgroupHome)
    mark = f"kevolve-escaper-{uuid.uuid4().hex}"
    cleanup.append(mark)
    orch = subprocess.Popen([sys.executable, "-c", ORCHESTRATOR, ESCAPER, mark, "cgroup", "hang"],
                            stdout=subprocess.PIPE, text=True)
    assert orch.stdout is not None
    worker = procfs.read_stat(int(orch.stdout.readline()))
    assert worker is not None
    orch.kill()
    orch.wait()
    assert eventually(lambda: not alive(worker))
    assert marked(mark)  # nobody cleaned up: the daemons are still there, in the cgroup
    assert cgroups.sweep(home.path) >= 1
    assert not marked(mark)


def test_doctor_names_the_containment_in_plain_lines() -> None:
    r = subprocess.run([sys.executable, "-m", "kevolve.cli", "doctor"], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "COLUMNS": "300"})
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if "containment" in line]
    assert lines and any(k in lines[0] for k in ("cgroup v2", "child subreaper", "process group only")), r.stdout
    assert "Traceback" not in r.stdout + r.stderr and "('" not in r.stdout, r.stdout
