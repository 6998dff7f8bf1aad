"""Build the evaluation image: from sandbox/Dockerfile (CUDA, pinned versions) or from this machine.

`build_local` needs no registry: it assembles a root filesystem from this machine's Python, the
worker's dependency closure in the current environment (torch, numpy, pydantic, ninja; on a machine
with a CUDA GPU also CuPy, NVRTC and Triton where installed) and
kevolve's own source, adds the shared libraries they link against, and `docker import`s it. That
is what CI and CPU-only machines use; `build_dockerfile` is for machines that reach a registry.
"""

from __future__ import annotations

import importlib.metadata as md
import io
import logging
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kevolve.languages import LANGUAGES
from kevolve.sandbox.isolate.gpu_passthrough import is_driver_lib

log = logging.getLogger(__name__)

DOCKERFILE = Path(__file__).with_name("Dockerfile")
WORKER_DISTS = ("torch", "numpy", "pydantic", "ninja")
# The kernel languages' GPU compile paths (CuPy/NVRTC, Triton …: kevolve/languages.py), taken where installed when
# this machine has a CUDA GPU: a CPU-only image (CI) stays small, a GPU machine's image runs their candidates too.
GPU_DISTS = tuple(d for lang in LANGUAGES.values() for d in lang.dists)
# kevolve packages the worker imports, and where they sit in the checkout.
_PACKAGES = {"kevolve": "kevolve", "kevolve.sandbox": "kevolve/sandbox", "kevolve.kernelbench": "kevolve/kernelbench"}
# Bytecode caches are kept (copied with their sources' mtimes, so they stay valid): without them
# every worker would compile torch's 2,000 modules at start-up, 3-5x slower than on the host.
_STDLIB_SKIP = {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3"}
PASSWD = "root:x:0:0:root:/root:/usr/sbin/nologin\nkevolve:x:1000:1000:kevolve:/scratch:/usr/sbin/nologin\n" \
         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
GROUP = "root:x:0:\nkevolve:x:1000:\nnogroup:x:65534:\n"


def _dist_closure(names: tuple[str, ...]) -> list[md.Distribution]:
    """The named distributions and everything they require (extras ignored), as installed here."""
    seen: dict[str, md.Distribution] = {}
    todo = list(names)
    while todo:
        name = re.split(r"[\s;<>=!~\[(]", todo.pop(), maxsplit=1)[0].lower().replace("_", "-")
        if not name or name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[name] = dist
        todo += [r for r in dist.requires or () if "extra ==" not in r]
    return list(seen.values())


def worker_dists() -> tuple[str, ...]:
    """What the image carries: the worker's own needs, plus the GPU compile paths on a GPU machine."""
    try:
        import torch

        gpu = torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no usable torch: the image build fails later, and says why
        gpu = False
    return WORKER_DISTS + (GPU_DISTS if gpu else ())


def cuda_home() -> Path | None:
    """This machine's CUDA toolkit (the folder holding include/cuda.h), as CuPy looks for it."""
    cands = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(str(Path(nvcc).resolve().parent.parent))
    for c in cands:
        if c and (Path(c) / "include" / "cuda.h").is_file():
            return Path(c)
    return None


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink() and not src.resolve().exists():
        return
    _link_or_copy(src, dst)


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    """A hard link where the file system allows one, else a copy (with its mtime: bytecode caches stay valid).

    The image's tree is only read (tarred into `docker import`): linking it costs no disk. Copying it cost
    the image's size a second time (1.15 GB with CPU torch), and CI's disk ran out there (stop 43)."""
    try:
        os.link(Path(src).resolve(), dst)
    except OSError:  # another file system, or protected_hardlinks on a file another user owns
        shutil.copy2(src, dst, follow_symlinks=True)


def _libs(paths: list[Path]) -> set[str]:
    """Shared libraries the given ELF files load (ldd), including the loader."""
    found: set[str] = set()
    for chunk in range(0, len(paths), 200):
        r = subprocess.run(["ldd", *map(str, paths[chunk:chunk + 200])], capture_output=True, text=True)
        for m in re.finditer(r"(?:=>\s*)?(/\S+)\s+\(0x", r.stdout):
            found.add(m.group(1))
    return found


def assemble_rootfs(root: Path) -> None:
    """Write the evaluation image's filesystem under `root`."""
    for name in ("bin", "lib", "lib64", "sbin"):
        (root / "usr" / name).mkdir(parents=True, exist_ok=True)
        (root / name).symlink_to(f"usr/{name}")
    for d in ("scratch", "cache", "tmp", "etc", "proc", "dev", "sys"):
        (root / d).mkdir(exist_ok=True)
    (root / "etc" / "passwd").write_text(PASSWD)
    (root / "etc" / "group").write_text(GROUP)
    exe = Path(sys.executable).resolve()
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    _copy(exe, root / "usr/local/bin" / ver)
    for alias in ("python", "python3"):
        (root / "usr/local/bin" / alias).symlink_to(ver)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    shutil.copytree(stdlib, root / "usr/local/lib" / ver, symlinks=True, copy_function=_link_or_copy,
                    ignore=lambda d, names: [n for n in names if n in _STDLIB_SKIP])
    libdir = sysconfig.get_config_var("LIBDIR")
    for so in Path(libdir).glob(f"lib{ver}*.so*") if libdir else ():
        _copy(so, root / "usr/local/lib" / so.name)
    site = root / "usr/local/lib" / ver / "site-packages"
    for dist in _dist_closure(worker_dists()):
        for f in dist.files or ():
            src = Path(dist.locate_file(f))
            if src.is_file() and not str(f).startswith(".."):
                _copy(src, site / f)
    for pkg, dest in _PACKAGES.items():
        src = _package_dir(pkg)
        for f in _package_files(pkg):
            _copy(f, site / dest / f.relative_to(src))
    cuda = cuda_home() if worker_dists() != WORKER_DISTS else None
    if cuda is not None:  # CuPy compiles RawKernels against the toolkit's headers (CUDA_PATH), not its own
        shutil.copytree(cuda / "include", root / "usr/local/cuda/include", dirs_exist_ok=True,
                        copy_function=_link_or_copy)
    elfs = [root / "usr/local/bin" / ver] + [p for p in root.rglob("*.so*") if p.is_file()]
    for lib in _libs(elfs):
        target = root / lib.lstrip("/")
        # the driver's own libraries come from the host at run time (they must match its kernel module)
        if is_driver_lib(Path(lib).name):
            continue
        if not target.exists() and not lib.startswith(str(root)):
            _copy(Path(lib), target)
    for cfg in ("/etc/ld.so.cache", "/etc/ld.so.conf"):
        if Path(cfg).exists():
            _copy(Path(cfg), root / cfg.lstrip("/"))


def _package_dir(pkg: str) -> Path:
    """Where a kevolve package's files are: a checkout's folders (kevolve.sandbox is sandbox/) or an
    installed wheel's (site-packages/kevolve/sandbox): the import system knows either way. Assuming the
    checkout's layout broke `sandbox build-image` for every pip-installed kevolve."""
    import importlib.util

    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"cannot find the package {pkg}")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def _package_files(pkg: str) -> list[Path]:
    """A worker package's files: kevolve's own top level only (in a wheel, kevolve/ also holds every
    subpackage), the whole tree of kevolve.sandbox and kevolve.kernelbench; no bytecode caches."""
    src = _package_dir(pkg)
    found = src.glob("*") if pkg == "kevolve" else src.rglob("*")
    return sorted(f for f in found if f.is_file() and "__pycache__" not in f.parts)


def source_hash() -> str:
    """What a locally built image was made from: kevolve's worker source and the Python/torch versions."""
    import hashlib

    h = hashlib.sha256(f"{sys.version}|{md.version('torch')}|{','.join(worker_dists())}".encode())
    for pkg in sorted(_PACKAGES):
        src = _package_dir(pkg)
        for f in _package_files(pkg):
            if f.suffix == ".py":
                h.update(f"{_PACKAGES[pkg]}/{f.relative_to(src)}".encode() + f.read_bytes())
    return h.hexdigest()[:16]


def ensure_local(tag: str, client: Any) -> str:
    """The image for this checkout: reused if its source hash matches, else rebuilt (about 1-2 min).

    One builder at a time per tag on this machine (a file lock): two kevolve processes, or two test
    workers, that want the image at once build it once; the second finds it built and reuses it."""
    import fcntl

    want = source_hash()
    if found := _current(tag, client, want):
        return found
    lock_path = Path(tempfile.gettempdir()) / f"kevolve-image-{re.sub(r'[^A-Za-z0-9_.-]', '_', tag)}.lock"
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if found := _current(tag, client, want):
            return found
        log.info("building %s from this machine's Python (source %s)", tag, want)
        return build_local(tag, client)


def _current(tag: str, client: Any, want: str) -> str | None:
    """The id of image `tag` if it was built from source hash `want`."""
    try:
        image = client.images.get(tag)
    except Exception:  # noqa: BLE001 - ImageNotFound
        return None
    return image.id if image.labels.get("org.kevolve.source_hash") == want else None


def build_local(tag: str, client: Any = None) -> str:
    """`docker import` a root filesystem made from this machine's Python; returns the image id."""
    import docker

    client = client or docker.from_env()
    with tempfile.TemporaryDirectory(prefix="kevolve-rootfs-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        assemble_rootfs(root)
        repo, _, version = tag.partition(":")
        # Some distributions' site.py (Ubuntu's 3.12, seen on the H100 machine) does not add
        # lib/pythonX.Y/site-packages under /usr/local: the worker then found no kevolve in the image.
        site = f"/usr/local/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
        changes = ["ENV PATH=/usr/local/bin:/usr/bin:/bin", f"ENV PYTHONPATH={site}", "ENV CUDA_PATH=/usr/local/cuda",
                   "ENV HOME=/scratch", "USER 1000:1000",
                   "WORKDIR /scratch", 'ENTRYPOINT ["python", "-m", "kevolve.sandbox.runner.container_entry"]',
                   f"LABEL org.kevolve.python={sys.version.split()[0]} org.kevolve.source_hash={source_hash()}"]
        # The tar is streamed into the daemon as it is written, never a file on disk (docker-py's own
        # import_image streams a generator but keeps its 60 s read timeout; the import takes longer on CI).
        api = client.api
        params = {"repo": repo, "tag": version or "latest", "fromSrc": "-", "changes": changes}
        api._result(api._post(api._url("/images/create"), data=_tar_stream(root), params=params, timeout=None,
                              headers={"Content-Type": "application/tar", "Transfer-Encoding": "chunked"}))
    return client.images.get(tag).id


def _tar_stream(root: Path, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The tar of `root`'s entries, in pieces, written by a thread into a pipe. A failure to write it is
    raised at the end (the daemon then sees a body cut short, not a smaller image)."""
    r, w = os.pipe()
    failed: list[BaseException] = []

    def write() -> None:
        try:
            with os.fdopen(w, "wb") as f, tarfile.open(fileobj=f, mode="w|") as tar:
                for entry in sorted(os.listdir(root)):
                    tar.add(root / entry, arcname=entry)
        except BaseException as e:  # noqa: BLE001 - handed to the reader, raised there
            failed.append(e)

    writer = threading.Thread(target=write, name="kevolve-image-tar", daemon=True)
    writer.start()
    with os.fdopen(r, "rb") as f:  # closed early (the request failed): the writer meets a broken pipe and ends
        while piece := f.read(chunk):
            yield piece
    writer.join()
    if failed:
        raise RuntimeError(f"writing the image's tar failed: {failed[0]}") from failed[0]


def build_dockerfile(tag: str, client: Any = None) -> str:
    """`docker build` sandbox/Dockerfile with kevolve's source as context; returns the image id."""
    import docker

    client = client or docker.from_env()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(DOCKERFILE, arcname="Dockerfile")
        for pkg in ("kevolve", "kevolve.sandbox", "kevolve.kernelbench"):
            tar.add(_package_dir(pkg), arcname=pkg.split(".")[-1], filter=lambda t: None if "__pycache__" in t.name else t)
    buf.seek(0)
    image, _ = client.images.build(fileobj=buf, custom_context=True, tag=tag, rm=True)
    return image.id


__all__ = ["DOCKERFILE", "assemble_rootfs", "build_dockerfile", "build_local", "ensure_local", "source_hash"]
