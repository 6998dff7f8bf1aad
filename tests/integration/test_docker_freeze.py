"""A container runner is frozen between the judge's commands, as a local runner is (issue 32).

Its process is the Docker client, so neither its process group nor the judge's own cgroups reach the
container's processes: the judge writes the container's own cgroup freeze switch (sandbox/isolate/freezer.py),
found from the container's init. Checked here on a real container that spins: no CPU while frozen, CPU again
once thawed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from testpaths import unavailable


@pytest.fixture(scope="module")
def client():  # noqa: ANN201
    pytest.importorskip("docker")
    from kevolve.sandbox.isolate.container import DockerUnavailable, docker_client
    from kevolve.sandbox.isolate.docker_image import ensure_local

    try:
        c = docker_client()
    except DockerUnavailable as e:
        unavailable(str(e))
    ensure_local("kevolve-eval:test", c)
    return c


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_a_containers_spinning_process_takes_no_cpu_while_frozen(client) -> None:  # noqa: ANN001
    from kevolve.sandbox.isolate import freezer

    c = client.containers.run("kevolve-eval:test", entrypoint=["python3", "-c", "while True: pass"], detach=True,
                              network_mode="none", labels={"kevolve.test": "freeze"})
    try:
        for _ in range(100):
            c.reload()
            if c.attrs["State"].get("Pid"):
                break
            time.sleep(0.05)
        pid = c.attrs["State"]["Pid"]
        switch = freezer.of(pid)
        assert switch is not None, Path(f"/proc/{pid}/cgroup").read_text()
        assert switch.freeze(True)
        time.sleep(0.05)
        before = _cpu_ticks(pid)
        time.sleep(0.5)
        assert _cpu_ticks(pid) == before  # frozen: not one tick
        assert switch.freeze(False)
        time.sleep(0.5)
        assert _cpu_ticks(pid) > before  # thawed: it spins again
    finally:
        c.remove(force=True)


def test_no_switch_for_a_process_in_the_root_cgroup() -> None:
    """The judge must never freeze a cgroup that holds more than the container: pid 1 of this machine
    (the root cgroup, or an init's own) gives no switch it could write, or one that is not the root's."""
    from kevolve.sandbox.isolate import freezer

    switch = freezer.of(1)
    assert switch is None or switch.control.parent not in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/freezer"))
