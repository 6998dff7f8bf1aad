"""The evaluation image is built without a second copy of itself on disk (sandbox/isolate/docker_image.py).

CI's disk ran out while the local build wrote its 1.15 GB tar beside a 1.15 GB copied tree (stop 43): the tree is
now hard links and the tar a stream into the daemon. The real import runs in every Docker test of the suite."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from kevolve.sandbox.isolate import docker_image


def _tree(root: Path) -> dict[str, bytes]:
    (root / "usr/lib").mkdir(parents=True)
    (root / "usr/lib/a.so").write_bytes(os.urandom(3 << 20))  # over the stream's 1 MiB pieces
    (root / "etc").mkdir()
    (root / "etc/passwd").write_text("root:x:0:0::/:/bin/sh\n")
    (root / "lib").symlink_to("usr/lib")
    return {"usr/lib/a.so": (root / "usr/lib/a.so").read_bytes(), "etc/passwd": b"root:x:0:0::/:/bin/sh\n"}


def test_the_streamed_tar_holds_the_tree(tmp_path: Path) -> None:
    want = _tree(tmp_path)
    data = b"".join(docker_image._tar_stream(tmp_path))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
        links = {m.name: m.linkname for m in tar.getmembers() if m.issym()}
    assert got == want
    assert links == {"lib": "usr/lib"}


def test_a_failed_tar_is_an_error_not_a_shorter_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path)
    real_add = tarfile.TarFile.add

    def add(self, name, arcname=None, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        if arcname == "usr/lib/a.so":  # mid-tree: what came before is already in the pipe
            raise OSError(28, "No space left on device")
        return real_add(self, name, arcname, *args, **kw)

    monkeypatch.setattr(tarfile.TarFile, "add", add)
    with pytest.raises(RuntimeError, match="No space left"):
        b"".join(docker_image._tar_stream(tmp_path))


def test_the_tree_is_linked_not_copied(tmp_path: Path) -> None:
    src = tmp_path / "src.py"
    src.write_text("x = 1\n")
    os.utime(src, (1_000_000, 1_000_000))
    docker_image._copy(src, tmp_path / "root/lib/src.py")
    dst = tmp_path / "root/lib/src.py"
    assert dst.read_text() == "x = 1\n" and dst.stat().st_mtime == 1_000_000
    assert dst.stat().st_ino == src.stat().st_ino  # same file system: a link, no bytes written


def test_a_file_that_cannot_be_linked_is_copied_with_its_mtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src.py"
    src.write_text("x = 1\n")
    os.utime(src, (1_000_000, 1_000_000))

    def refuse(*a: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", refuse)
    docker_image._copy(src, tmp_path / "root/src.py")
    dst = tmp_path / "root/src.py"
    assert dst.read_text() == "x = 1\n" and dst.stat().st_mtime == 1_000_000  # bytecode caches stay valid
    assert dst.stat().st_ino != src.stat().st_ino
