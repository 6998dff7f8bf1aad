"""Two processes that want the evaluation image at once build it once (sandbox/isolate/docker_image.py)."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from pathlib import Path


class _Images:
    """A Docker client's `images` whose state is a file shared by the processes (the engine's store)."""

    def __init__(self, store: Path) -> None:
        self.store = store

    def get(self, tag: str):  # noqa: ANN201
        state = json.loads(self.store.read_text()) if self.store.exists() else {}
        if tag not in state:
            raise LookupError(tag)  # docker.errors.ImageNotFound in the real client

        class Image:
            id = state[tag]["id"]
            labels = {"org.kevolve.source_hash": state[tag]["hash"]}

        return Image()


class _Client:
    def __init__(self, store: Path) -> None:
        self.images = _Images(store)


def _want(tag: str, store: Path, log: Path, go) -> None:  # noqa: ANN001
    from kevolve.sandbox.isolate import docker_image

    def build_local(tag: str, client: object) -> str:
        with open(log, "a") as f:
            f.write("built\n")
        time.sleep(1.0)  # a build takes minutes; long enough for the other process to arrive meanwhile
        store.write_text(json.dumps({tag: {"id": "sha256:one", "hash": docker_image.source_hash()}}))
        return "sha256:one"

    docker_image.build_local = build_local
    go.wait()
    with open(log, "a") as f:
        f.write(docker_image.ensure_local(tag, _Client(store)) + "\n")


def test_two_processes_wanting_the_image_at_once_build_it_once(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    go = ctx.Barrier(2)
    store, log = tmp_path / "images.json", tmp_path / "log"
    tag = f"kevolve-eval:locktest-{tmp_path.name}"
    procs = [ctx.Process(target=_want, args=(tag, store, log, go)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    lines = log.read_text().split()
    assert lines.count("built") == 1, lines
    assert lines.count("sha256:one") == 2, lines
