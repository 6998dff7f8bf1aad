"""Hostile candidates are contained on both backends, each with its own reason, and the next works.

Every `*.py` here (besides the tests) is a Python-only candidate whose docstring names what it
tries. Each test evaluates it through the real sandbox (bubblewrap-confined local workers, or
Docker containers) and then evaluates an honest candidate, which must still be accepted. The daemon
test also runs on plain local workers (no bubblewrap, as on GPU machines without it), once per
containment kind.
"""

from __future__ import annotations

import ast
import os
import signal
import socket
import threading
import sys
import time
import uuid
from pathlib import Path

import pytest

from kevolve.records import Outcome
from kevolve.sandbox.isolate.containment import ContainmentKind

HERE = Path(__file__).parent
REPO = HERE.parent.parent.parent


def source(name: str, **fill: object) -> str:
    text = (HERE / f"{name}.py").read_text()
    for key, value in fill.items():
        text = text.replace(f"__{key.upper()}__", repr(value))
    return text


def assert_next_evaluation_works(evaluate) -> None:  # noqa: ANN001
    after = evaluate(source("honest"))
    assert after.ok, f"after a hostile candidate: {after.reason}"


def beside_the_toolchain() -> list[Path]:
    """Secrets planted where the runner's view reaches near them (red team 8, both confinements): a vendor folder of
    /opt that holds no toolchain, and a file at the top of the Python installation and of the virtual environment
    (where pip reads a site-wide pip.conf). Only where this user may write there; the caller removes them."""
    tag = uuid.uuid4().hex[:8]
    places = [Path("/opt") / f"kevolve-vendor-{tag}" / "app.conf",
              *{Path(p).resolve() / f"kevolve-site-{tag}.conf" for p in (sys.prefix, sys.base_prefix)}]
    planted = []
    for p in places:
        try:
            p.parent.mkdir(exist_ok=True)
            p.write_text("sk-secret")
        except OSError:
            continue
        planted.append(p)
    return planted


def remove_planted(planted: list[Path]) -> None:
    for p in planted:
        p.unlink(missing_ok=True)
        if p.parent.name.startswith("kevolve-vendor-"):
            p.parent.rmdir()


def test_candidate_cannot_read_secrets_outside_scratch(evaluate, tmp_path) -> None:  # noqa: ANN001
    secrets = [tmp_path / "archive.db", REPO / ".pytest_cache" / "hostile-run-folder-secret"]
    for s in secrets:
        s.parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has no .pytest_cache yet
        s.write_text("sk-secret")
    secrets += beside_the_toolchain()
    home = [str(p) for p in sorted(Path.home().iterdir()) if p.is_file()][:3]
    try:
        ev = evaluate(source("reads_secrets", targets=[str(s) for s in secrets] + home))
    finally:
        secrets[1].unlink()
        remove_planted(secrets[2:])
    assert ev.ok, ev.reason  # wrong results if any file was readable


def test_candidate_cannot_write_outside_scratch(evaluate, tmp_path) -> None:  # noqa: ANN001
    # (/tmp is not a target: each worker has a private one, gone with it.)
    targets = [tmp_path / "pwned", REPO / "pwned-by-candidate", Path("/usr/lib/pwned-by-candidate"),
               Path.home() / "pwned-by-candidate"]
    ev = evaluate(source("writes_outside_scratch", targets=[str(t) for t in targets]))
    leaked = [t for t in targets if t.exists()]
    for t in leaked:
        t.unlink()
    assert not leaked, leaked
    assert ev.ok, ev.reason


def test_candidate_cannot_reach_a_listener_on_the_host(evaluate) -> None:  # noqa: ANN001
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    seen: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            seen.append(conn.recv(64))
            conn.close()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        ev = evaluate(source("opens_socket", port=server.getsockname()[1]))
    finally:
        stop.set()
        t.join()
        server.close()
    assert not seen, seen
    assert ev.ok, ev.reason


def test_fork_bomb_hits_the_process_limit(evaluate) -> None:  # noqa: ANN001
    # The default process limit (512) and the hostile tests' 4 GB memory limit: the local memory
    # watch counts shared copy-on-write pages once (PSS), so hundreds of forks of a Python process
    # are not mistaken for a memory blow-up and the fork bomb keeps its own reason.
    ev = evaluate(source("fork_bomb"))
    assert (ev.outcome, ev.reason_code) == (Outcome.RUNTIME_ERROR, "runtime_error"), ev.reason
    assert "Resource temporarily unavailable" in ev.reason
    assert_next_evaluation_works(evaluate)


def test_filling_the_disk_stops_at_the_scratch_limit(evaluate) -> None:  # noqa: ANN001
    ev = evaluate(source("fills_disk"), scratch_limit_gb=0.25)
    assert (ev.outcome, ev.reason_code) == (Outcome.CRASHED, "disk_limit"), ev.reason
    assert "during correctness" in ev.reason
    assert_next_evaluation_works(evaluate)


@pytest.mark.parametrize("isolation", ["bwrap", "none", "docker"])
def test_a_removed_file_held_open_counts_against_the_scratch_limit(isolation, plain_evaluate, request,  # noqa: ANN001
                                                                   hostile_config) -> None:
    """Red team 7: 1.5 GB held in /dev/shm through a removed, open file: `ok` under both isolations before. In a
    container the scratch is a host folder: the same file held there was `ok` until 2026-11-29."""
    from kevolve.contract import load_problem
    from kevolve.records import Candidate
    from kevolve.sandbox.config import Backend

    if isolation == "none":
        ev = plain_evaluate(ContainmentKind.PROCESS_GROUP)(source("holds_unlinked_file"), scratch_limit_gb=0.25)
    elif isolation == "docker":
        prob = load_problem(REPO / "tests" / "fixtures" / "problems" / "relu.py")
        box, cfg = request.getfixturevalue("docker_box"), hostile_config.model_copy(update={"backend": Backend.DOCKER})
        box.reference(prob, cfg)
        ev = box.evaluate(prob, Candidate.from_source(source("holds_unlinked_file"), prob.id),
                          cfg.model_copy(update={"scratch_limit_gb": 0.25}))
    else:
        bwrap_box = request.getfixturevalue("bwrap_box")
        prob = load_problem(REPO / "tests" / "fixtures" / "problems" / "relu.py")
        bwrap_box.reference(prob, hostile_config)
        ev = bwrap_box.evaluate(prob, Candidate.from_source(source("holds_unlinked_file"), prob.id),
                                hostile_config.model_copy(update={"scratch_limit_gb": 0.25}))
    assert (ev.outcome, ev.reason_code) == (Outcome.CRASHED, "disk_limit"), ev.reason


@pytest.mark.parametrize("confine", ["auto", "off"])
def test_a_runner_is_held_to_the_users_pipe_buffer_limit(plain_evaluate, confine) -> None:  # noqa: ANN001
    """Red team 8: 900 MB of pipe buffers held under `none` as root (kernel memory no watch sees); a runner gives up
    the capabilities that pass the user's limit whatever its confinement (bubblewrap and Docker drop them too)."""
    if os.geteuid() != 0:
        pytest.skip("a user other than root is held to pipe-user-pages-soft anyway")
    ev = plain_evaluate(ContainmentKind.PROCESS_GROUP)(source("holds_pipe_buffers"), confine_writes=confine)
    assert ev.ok, ev.reason


def test_in_a_sandbox_pipe_buffers_stay_under_the_users_limit(evaluate) -> None:  # noqa: ANN001
    ev = evaluate(source("holds_pipe_buffers"))
    assert ev.ok, ev.reason


def test_allocating_all_memory_stops_at_the_memory_limit(evaluate) -> None:  # noqa: ANN001
    ev = evaluate(source("allocates_all_memory"), memory_limit_gb=2.0)
    assert (ev.outcome, ev.reason_code) == (Outcome.CRASHED, "memory_limit"), ev.reason
    assert_next_evaluation_works(evaluate)


def test_spinning_forever_is_killed_from_outside_at_the_timeout(evaluate) -> None:  # noqa: ANN001
    # 20 s: the job's deadline covers the load and the correctness calls; the spinner burns three cores' worth
    # of threads until then, so a longer wait only slows whatever runs beside it (45 s before, 2026-11-27).
    ev = evaluate(source("spins_forever"), timeout_s=20)
    assert (ev.outcome, ev.reason_code) == (Outcome.TIMEOUT, "timeout"), ev.reason
    assert "during correctness" in ev.reason
    assert_next_evaluation_works(evaluate)


def test_hostile_candidates_are_evaluated_with_the_policy_off(hostile_config) -> None:  # noqa: ANN001
    # the policy would reject them before they run (test_policy_layer.py); here the isolation is tested
    assert hostile_config.policy_allow == ("all",)


def daemons(mark: str, settle_s: float = 3.0) -> list[int]:
    """Live processes with `mark` in their argv, once the kernel had `settle_s` to finish a kill."""
    from kevolve.sandbox.isolate.procfs import cmdline

    deadline = time.monotonic() + settle_s
    while True:
        found = [int(p) for p in os.listdir("/proc") if p.isdigit() and mark in cmdline(int(p))]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def kill_daemons(mark: str) -> None:
    for pid in daemons(mark, 0):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def spinning_daemon_verdict(ev, counted: bool) -> None:  # noqa: ANN001
    """The daemon spins beside the timed calls. Where the runner has a cgroup (local runners on the CPU)
    the daemon is in it: frozen with the runner between its commands (it cannot slow the reference), and
    inside its windows its CPU is the candidate's own time (sandbox/judge/clock.py), so the ReLU is either
    `ok` at a speed that holds the daemon's work, or `background_cpu` where the daemon took more than a
    core's share inside the windows. Where nothing counts an escaped process (the subreaper's
    containment, a container) the honest ReLU is ok."""
    if counted:
        assert ev.ok or (ev.outcome, ev.reason_code) == (Outcome.REJECTED, "background_cpu"), ev.reason
    else:
        assert ev.ok, ev.reason


def test_a_daemon_left_behind_dies_with_its_worker(evaluate, request) -> None:  # noqa: ANN001
    from kevolve.sandbox.isolate.containment import choose

    mark = f"kevolve-daemon-{uuid.uuid4().hex}"
    try:
        ev = evaluate(source("starts_daemon", mark=mark))
        left = daemons(mark)
        spinning_daemon_verdict(ev, request.node.callspec.params["evaluate"] != "docker"
                                and choose().kind is ContainmentKind.CGROUP)
        assert not left, left
        assert_next_evaluation_works(evaluate)
    finally:
        kill_daemons(mark)


@pytest.mark.parametrize("kind", [ContainmentKind.CGROUP, ContainmentKind.SUBREAPER], ids=str)
def test_a_daemon_left_behind_dies_with_its_worker_without_bubblewrap(kind, plain_evaluate) -> None:  # noqa: ANN001
    from testpaths import unavailable

    from kevolve.sandbox.isolate import cgroups

    if kind is ContainmentKind.CGROUP and isinstance(home := cgroups.home(), cgroups.Unavailable):
        unavailable(f"cgroup v2: {home.reason}")
    evaluate = plain_evaluate(kind)
    mark = f"kevolve-daemon-{uuid.uuid4().hex}"
    try:
        ev = evaluate(source("starts_daemon", mark=mark))
        left = daemons(mark)
        spinning_daemon_verdict(ev, kind is ContainmentKind.CGROUP)
        assert not left, left
        assert_next_evaluation_works(evaluate)
    finally:
        kill_daemons(mark)


def test_the_process_group_alone_lets_the_daemon_outlive_its_evaluation(plain_evaluate) -> None:  # noqa: ANN001
    """The incident, reproduced: the daemon really escapes a process-group kill (so the two tests
    above would fail without containment)."""
    evaluate = plain_evaluate(ContainmentKind.PROCESS_GROUP)
    mark = f"kevolve-daemon-{uuid.uuid4().hex}"
    try:
        ev = evaluate(source("starts_daemon", mark=mark))
        assert ev.ok, ev.reason
        assert daemons(mark, 0)
    finally:
        kill_daemons(mark)


def _escape_listeners(tmp_path: Path):  # noqa: ANN202
    """A unix socket and a loopback TCP port on the host, recording whoever connects."""
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = f"/tmp/kevolve-escape-{uuid.uuid4().hex[:8]}.sock"  # where a daemon's socket would be, not under scratch
    unix.bind(path)
    unix.listen(4)
    tcp = socket.create_server(("127.0.0.1", 0))
    seen: list[str] = []
    stop = threading.Event()

    def accept(server: socket.socket, name: str) -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                seen.append(name)
                conn.close()
            except OSError:
                pass

    threads = [threading.Thread(target=accept, args=(unix, "unix")), threading.Thread(target=accept, args=(tcp, "tcp"))]
    for t in threads:
        t.start()

    def close() -> None:
        stop.set()
        for t in threads:
            t.join()
        unix.close()
        tcp.close()
        os.unlink(path)

    return path, tcp.getsockname()[1], seen, close


@pytest.mark.parametrize("isolation", ["none", "bwrap"])
def test_sockets_shared_memory_and_clone3_are_refused_to_a_candidate(isolation, plain_evaluate, bwrap_box,  # noqa: ANN001
                                                                      hostile_config, tmp_path) -> None:
    """The runner's seccomp filter (isolate/seccomp.py): without it, under isolation none, the candidate reached the
    host's unix sockets and loopback, made a System V segment that outlived it and could leave its cgroup."""
    import ctypes

    from kevolve.contract import load_problem
    from kevolve.records import Candidate
    from kevolve.sandbox.config import Isolation

    path, port, seen, close = _escape_listeners(tmp_path)
    key = int(uuid.uuid4().hex[:7], 16)
    src = source("escapes_by_syscall", unix_path=path, port=port, shm_key=key)
    try:
        if isolation == "none":
            ev = plain_evaluate(ContainmentKind.PROCESS_GROUP)(src)
        else:
            prob = load_problem(REPO / "tests" / "fixtures" / "problems" / "relu.py")
            bwrap_box.reference(prob, hostile_config)
            ev = bwrap_box.evaluate(prob, Candidate.from_source(src, prob.id), hostile_config)
    finally:
        close()
    libc = ctypes.CDLL(None, use_errno=True)
    left = libc.shmget(ctypes.c_int(key), ctypes.c_size_t(0), ctypes.c_int(0))
    if left >= 0:
        libc.shmctl(ctypes.c_int(left), 0, None)  # IPC_RMID
    assert ev.ok, ev.reason
    assert not seen and left < 0, (seen, left)
    assert hostile_config.isolation is Isolation.BWRAP  # the bwrap case ran under bubblewrap


def test_every_hostile_file_is_documented_and_tested() -> None:
    names = {p.stem for p in HERE.glob("*.py") if not p.name.startswith(("test_", "conftest"))}
    text = Path(__file__).read_text()
    for name in names - {"honest"}:
        assert f'source("{name}"' in text, name
        doc = ast.get_docstring(ast.parse((HERE / f"{name}.py").read_text())) or ""
        assert doc.startswith("Hostile") and "Expected" in doc, name


def _landlock_or_skip() -> None:
    from kevolve.sandbox.isolate import landlock

    if landlock.abi() <= 0:
        pytest.skip("this kernel has no Landlock: a runner without a sandbox is confined by nothing")


@pytest.mark.parametrize("confine", ["auto", "off"])
def test_without_bubblewrap_a_candidate_reads_only_its_own_view(plain_evaluate, tmp_path, confine) -> None:  # noqa: ANN001
    """Landlock's read rules (isolation none, confine_writes auto on the CPU): the user's files under /tmp, the
    checkout, the home folder and a neighbour evaluation's buffers in /dev/shm are out of reach; with the
    confinement off the same candidate reads them (the test can fail)."""
    _landlock_or_skip()
    neighbour = Path(f"/dev/shm/kevolve-neighbour-{uuid.uuid4().hex[:8]}")
    neighbour.mkdir()
    secrets = [tmp_path / "archive.db", REPO / ".pytest_cache" / "hostile-run-folder-secret", neighbour / "shm-slot"]
    for s in secrets:
        s.parent.mkdir(parents=True, exist_ok=True)
        s.write_text("sk-secret")
    secrets += beside_the_toolchain()
    home = [str(p) for p in sorted(Path.home().iterdir()) if p.is_file()][:3]
    try:
        ev = plain_evaluate(ContainmentKind.PROCESS_GROUP)(
            source("reads_secrets", targets=[str(s) for s in secrets] + home), confine_writes=confine)
    finally:
        secrets[1].unlink()
        secrets[2].unlink()
        neighbour.rmdir()
        remove_planted(secrets[3:])
    if confine == "auto":
        assert ev.ok, ev.reason  # wrong results if any file was readable
    else:
        assert ev.outcome is Outcome.INCORRECT, ev.reason


@pytest.mark.parametrize("confine", ["auto", "off"])
def test_without_bubblewrap_a_candidate_writes_only_its_scratch(plain_evaluate, tmp_path, confine) -> None:  # noqa: ANN001
    """Landlock's write rules: nothing under /tmp, the checkout, the home folder or /dev/shm (a file planted there
    outlives the evaluation and no scratch limit sees it; a neighbour's input slot there was poisoned by the second
    red team) — only its scratch. With the confinement off the writes land (the test can fail)."""
    _landlock_or_skip()
    neighbour = Path(f"/dev/shm/kevolve-neighbour-{uuid.uuid4().hex[:8]}")
    neighbour.mkdir()
    slot = neighbour / "shm-slot"
    slot.write_text("inputs")
    fresh = [tmp_path / "pwned", REPO / "pwned-by-candidate", Path.home() / "pwned-by-candidate",
             Path(f"/dev/shm/kevolve-planted-{uuid.uuid4().hex[:8]}")]
    try:
        plain_evaluate(ContainmentKind.PROCESS_GROUP)(
            source("writes_outside_scratch", targets=[str(t) for t in [*fresh, slot]]), confine_writes=confine)
        landed = [t for t in fresh if t.exists()] + ([slot] if slot.read_text() != "inputs" else [])
    finally:
        for t in fresh:
            t.unlink(missing_ok=True)
        slot.unlink()
        neighbour.rmdir()
    if confine == "auto":
        assert not landed, landed
    else:
        assert landed, "with confinement off the writes land"
