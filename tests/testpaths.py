"""Paths shared by test modules (import this, not `conftest`: several conftest modules exist)."""

from __future__ import annotations

import os
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
# One build cache for the whole test session: a C++ extension takes ~30 s to build on 2 cores,
# and many tests share a source.
BUILD_CACHE = Path(os.environ.get("KEVOLVE_TEST_CACHE", Path(__file__).parent.parent / ".pytest_cache" / "kevolve"))
# How the tests' sandboxes confine workers, from the environment: KEVOLVE_TEST_ISOLATION=bwrap makes
# every test that does not choose for itself refuse to run without bubblewrap (e.g. tests/gpu on a
# GPU machine), and KEVOLVE_BWRAP names a bwrap that is not on PATH (scripts/unpack_bwrap.sh).
ISOLATION = {"isolation": os.environ.get("KEVOLVE_TEST_ISOLATION", "auto"), "bwrap": os.environ.get("KEVOLVE_BWRAP") or None}


def unavailable(why: str) -> None:
    """Skip a test whose sandbox backend is missing here; on CI (CI=true) fail instead: .ci/run installs it."""
    import pytest

    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run this backend: {why}")
    pytest.skip(why)


def needs_psycopg() -> None:
    """Skip a test that opens a PostgreSQL URL where the driver is not installed (the answer is then the install
    hint, not the connection's error); on CI, which installs it, fail instead (`unavailable`)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install 'kevolve[archive]'): no PostgreSQL URL can be tried")


def bench_exit_code(run_dir: Path) -> int:
    """The exit code `kevolve bench` documents for the verdicts in its run folder (results.jsonl, as its writer
    wrote it): 0 when some problem has a kernel faster than eager, 4 when none beat eager, 5 when none was correct.
    The tests' own kernels on the CPU may or may not beat eager on a given machine."""
    from kevolve.kernelbench.metrics import bench_answer
    from kevolve.kernelbench.store import ResultRow

    lines = (Path(run_dir) / "results.jsonl").read_text().splitlines()
    return bench_answer([ResultRow.model_validate_json(x) for x in lines if x.strip()])[0].exit_code


# `kevolve optimize`'s exit code for its result's answer (kevolve.records.Answer).
OPTIMIZE_EXIT = {"improved": 0, "not_faster": 4, "none_correct": 5}


def ensure_shared_pch() -> None:
    """The precompiled `torch/extension.h` the build service makes (the recipe's `make_pch`, as
    sandbox/build/service.py calls it), made once in the tests' shared build cache for C++ extensions with torch's
    default flags (50 of the 61 load_inline sources under tests/). A build that finds it compiles main.cpp in seconds
    instead of parsing torch's headers for ~30 s on 2 cores; CI starts with an empty cache, and many tests build
    without the service (an evaluation builds in its runner, sandbox/build/compile.py `_build_here`, which uses a PCH
    it finds)."""
    import shutil

    from kevolve.sandbox.build.compile import _run_here, device_arch
    from kevolve.sandbox.build.extensions import ExtensionSpec
    from kevolve.sandbox.build.recipe import BuildTarget, Toolchain, make_pch, pch_id

    import fcntl

    tc = Toolchain.detect()
    if shutil.which(tc.cxx) is None:
        return
    spec = ExtensionSpec(name="pch", cpp_sources=("",))
    pch = BUILD_CACHE / "pch"
    pch.mkdir(parents=True, exist_ok=True)
    with open(pch / ".lock", "w") as lock:  # one maker at a time where test sessions run side by side (pytest -n)
        fcntl.flock(lock, fcntl.LOCK_EX)
        make_pch(pch / pch_id(tc, spec, BuildTarget.current(device_arch())), tc, spec, _run_here, pch, 600.0)


def prebuild(*sources: str) -> None:
    """The C++ extensions these candidate sources build, made by the build service into the tests' shared cache
    (its content-keyed `extensions/by-source/`, which every runner imports from without building, as `bench` and
    `optimize` prebuild each proposal): one build (~7 s on 2 cores with the PCH) for the 18 adversarial candidates
    that carry the honest ReLU's extension. Without it each built its own copy in its runner (a candidate's own
    builds are cached under its whole source's scope, so no other source can load them)."""
    import shutil

    from kevolve.sandbox.build.compile import device_arch
    from kevolve.sandbox.build.recipe import BuildTarget, Toolchain
    from kevolve.sandbox.build.service import BuildService

    if shutil.which(Toolchain.detect().cxx) is None:
        return
    ensure_shared_pch()
    service = BuildService(BUILD_CACHE, BuildTarget.current(device_arch()))
    try:
        for fut in [f for src in sources for f in service.submit_source(src)]:
            fut.result(timeout=600)
    finally:
        service.close()
