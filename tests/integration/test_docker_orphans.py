"""A judge that dies without closing its runners leaves no container behind for long.

A container's runner waits on FIFOs opened read-write at both ends, so nothing tells it that its judge
was killed (SIGKILL, or `killpg` after a shutdown that gave no answer): every full CI run used to
leave two `kevolve-eval` containers running. Containers carry their judge's owner tag; the next judge
to start a container, and the parent closing a judge it killed, remove those whose judge is gone.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from testpaths import FIXTURES, unavailable

TORCH_ONLY = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


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


def _owned_by(client, pid: int, tag: str) -> list:  # noqa: ANN001
    from kevolve.sandbox.isolate.container import _OWNER

    return [c for c in client.containers.list(all=True, filters={"label": _OWNER}) if c.labels.get(_OWNER) == tag]


def _judge_with_containers(client, cfg, prob):  # noqa: ANN001, ANN202
    from kevolve.records import Candidate
    from kevolve.sandbox.isolate.container import owner_tag
    from kevolve.sandbox.parent.local import LocalSandbox

    box = LocalSandbox(spares=2)
    box.reference(prob, cfg)
    ev = box.evaluate(prob, Candidate.from_source(TORCH_ONLY, prob.id), cfg)
    assert ev.ok, ev.reason
    judge = box._judges[cfg.device]
    tag = owner_tag(judge.proc.pid)
    assert tag and _owned_by(client, judge.proc.pid, tag), "the judge holds no container to leave behind"
    return box, judge, tag


def _kill(judge) -> None:  # noqa: ANN001
    os.killpg(judge.proc.pid, signal.SIGKILL)
    judge.proc.wait()


def test_the_containers_of_a_killed_judge_are_removed(client, cpu_config) -> None:  # noqa: ANN001
    from kevolve.contract import load_problem
    from kevolve.sandbox.config import Backend
    from kevolve.sandbox.parent.local import LocalSandbox

    cfg = cpu_config.model_copy(update=dict(backend=Backend.DOCKER, image="kevolve-eval:test", allow_torch_only=True,
                                            memory_limit_gb=4.0, policy_allow=("all",)))
    prob = load_problem(FIXTURES / "problems" / "relu.py")

    # 1. killed and never closed: the containers outlive it, until the next judge starts a container
    box, judge, tag = _judge_with_containers(client, cfg, prob)
    _kill(judge)
    time.sleep(1.0)
    left = _owned_by(client, judge.proc.pid, tag)
    assert left and all(c.status in ("created", "running") for c in left), [c.status for c in left]
    box._judges.clear()  # as if the process that held it had died too
    other = LocalSandbox(spares=0)
    try:
        other.reference(prob, cfg)
        assert not _owned_by(client, judge.proc.pid, tag)
    finally:
        other.close()

    # 2. killed, then closed by its parent (LocalSandbox after a lost judge): removed at once
    box, judge, tag = _judge_with_containers(client, cfg, prob)
    _kill(judge)
    box.close()
    assert not _owned_by(client, judge.proc.pid, tag)


def test_containers_of_a_live_judge_or_another_machine_are_kept(client, tmp_path) -> None:  # noqa: ANN001
    from kevolve.sandbox.isolate.container import _owner_alive, owner_tag

    me = owner_tag()
    assert me and _owner_alive(me)
    boot, _, rest = me.partition(":")
    ns, pid, start = rest.rsplit(":", 2)
    assert not _owner_alive(f"{boot}:{ns}:{pid}:{int(start) + 1}")  # the pid reused by a later process
    assert _owner_alive(f"00000000-0000-0000-0000-000000000000:{ns}:{pid}:{int(start) + 1}")  # another boot
    assert _owner_alive(f"{boot}:pid:[1]:{pid}:{int(start) + 1}")  # another pid namespace


def test_sandbox_prune_removes_what_judges_left_and_doctor_counts_it(client) -> None:  # noqa: ANN001
    from typer.testing import CliRunner

    from kevolve.cli import app
    from kevolve.sandbox.isolate.container import _LABEL, _OWNER, left_behind, owner_tag

    boot, _, rest = owner_tag().partition(":")
    ns, pid, start = rest.rsplit(":", 2)
    dead = f"{boot}:{ns}:{pid}:{int(start) + 1}"  # this pid, but another (gone) process
    made = [client.containers.create("kevolve-eval:test", ["cpu"], labels={_LABEL: "1", _OWNER: dead}),
            client.containers.create("kevolve-eval:test", ["cpu"], labels={_LABEL: "1"})]  # an older kevolve's
    ids = {c.id for c in made}
    try:
        orphans, unowned = left_behind(client)
        assert made[0].id in {c.id for c in orphans} and made[1].id in {c.id for c in unowned}
        runner = CliRunner()
        doctor = runner.invoke(app, ["sandbox", "status"])
        assert doctor.exit_code == 0, doctor.output
        row = next(line for line in doctor.output.splitlines() if line.startswith("docker runners left behind:"))
        assert "of judges that are gone" in row and "without an owner label" in row and "prune --all" in row
        once = runner.invoke(app, ["sandbox", "prune"])
        assert once.exit_code == 0 and "without an owner label left (--all removes them)" in once.output, once.output
        still = {c.id for c in client.containers.list(all=True, filters={"label": f"{_LABEL}=1"})}
        assert made[0].id not in still and made[1].id in still
        every = runner.invoke(app, ["sandbox", "prune", "--all"])
        assert every.exit_code == 0 and every.output.startswith("removed "), every.output
        still = {c.id for c in client.containers.list(all=True, filters={"label": f"{_LABEL}=1"})}
        assert not ids & still
    finally:
        for c in made:
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001, S110 - removed by the test
                pass
