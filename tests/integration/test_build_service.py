"""The build service compiles candidates' extensions from their text alone, and workers import the result.

Real compiler, real files, real worker-side hook in a fresh interpreter. C++ only (no GPU here).
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from testpaths import FIXTURES, unavailable

from kevolve.sandbox.build.recipe import artifact_dir
from kevolve.sandbox.build.service import BuildService, BuildStatus
from kevolve.sandbox.config import Isolation
from kevolve.sandbox.build.extensions import ExtensionSpec
from kevolve.sandbox.build.recipe import BuildTarget, module_name

RELU = (FIXTURES / "solutions" / "relu_cpp.py").read_text()


def _service(cache: Path, isolation: Isolation = Isolation.AUTO) -> BuildService:
    # No precompiled header here: building one takes a minute on CI's two cores.
    return BuildService(cache, BuildTarget.current(""), workers=2, isolation=isolation, timeout_s=300, max_pch=0)


def _booby_trapped(marker: Path, name: str) -> str:
    """relu_cpp with module code that leaves a marker and dies before its load_inline line runs."""
    trap = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\nraise SystemExit('candidate code ran')\n"
    return RELU.replace("_src = r", trap + "_src = r", 1).replace('"relu_ext"', repr(name))


def _load_in_fresh_worker(cache: Path, private: Path, source: str) -> subprocess.CompletedProcess[str]:
    """Install the worker's hooks in a new interpreter and run `source`; no compiler or ninja on PATH."""
    code = ("import sys, torch\nfrom pathlib import Path\n"
            "from kevolve.sandbox.build.compile import install_build_hooks, BUILT_MODULES\n"
            "install_build_hooks(Path(sys.argv[1]), Path(sys.argv[2]), 'scope')\n"
            "ns = {}\nexec(compile(sys.stdin.read(), 'candidate.py', 'exec'), ns)\n"
            "y = ns['ModelNew']()(torch.tensor([-1.0, 2.0]))\nprint(ns['ext'].__name__, y.tolist(), sorted(BUILT_MODULES))\n")
    env = {**os.environ, "PATH": "/nonexistent"}
    return subprocess.run([sys.executable, "-c", code, str(cache), str(private)], input=source, env=env,
                          capture_output=True, text=True, timeout=300)


def _build_in_worker(cache: Path, private: Path, source: str, then: str) -> subprocess.CompletedProcess[str]:
    """Run `source` in a new interpreter with the worker's build hooks (compilers on PATH); `then` prints."""
    code = ("import sys, torch\nfrom pathlib import Path\n"
            "from kevolve.sandbox.build.compile import install_build_hooks\n"
            "install_build_hooks(Path(sys.argv[1]), Path(sys.argv[2]), 'scope')\n"
            f"ns = {{}}\nexec(compile(sys.stdin.read(), 'candidate.py', 'exec'), ns)\n{then}\n")
    return subprocess.run([sys.executable, "-c", code, str(cache), str(private)], input=source, capture_output=True,
                          text=True, timeout=600)


def test_service_builds_without_running_the_candidate_and_workers_import_it_without_building(tmp_path: Path) -> None:
    marker = tmp_path / "candidate-ran"
    cache = tmp_path / "cache"
    svc = _service(cache)
    try:
        with ThreadPoolExecutor(4) as pool:  # the same extension under two names, submitted concurrently
            subs = list(pool.map(svc.submit_source, [_booby_trapped(marker, "relu_a"), _booby_trapped(marker, "relu_b")] * 2))
        futures = {id(f) for fs in subs for f in fs}
        assert len(futures) == 1, "identical extensions must share one build"
        res = subs[0][0].result(timeout=600)
    finally:
        svc.close()
    assert res.ok and res.status is BuildStatus.BUILT, res.log_tail
    assert not marker.exists(), "the service ran the candidate's module code"
    assert [p.name for p in (cache / "extensions" / "by-source").iterdir()] == [res.key]
    assert (artifact_dir(cache, res.key) / f"{module_name(res.key)}.so").is_file()

    again = _service(cache)
    try:
        assert again.submit_source(_booby_trapped(marker, "relu_c"))[0].result().status is BuildStatus.CACHED
    finally:
        again.close()

    private = tmp_path / "private"
    for name in ("relu_x", "relu_y"):  # another name, the same sources: the same artifact, nothing compiled
        out = _load_in_fresh_worker(cache, private, RELU.replace('"relu_ext"', repr(name)))
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split()[0] == module_name(res.key)
        assert "[0.0, 2.0]" in out.stdout
    assert not any(private.rglob("*")) or all(p.is_dir() for p in private.rglob("*")), "the worker built something"


def test_worker_hook_builds_with_the_fast_recipe_when_the_service_has_not(tmp_path: Path) -> None:
    cache, private = tmp_path / "cache", tmp_path / "private"
    out = _build_in_worker(cache, private, RELU.replace('"relu_ext"', '"relu_local"'), "print(ns['ext'].__name__)")
    assert out.returncode == 0, out.stderr[-2000:]
    mod = out.stdout.split()[-1]
    built = private / "extensions" / "scope" / mod
    assert sorted(p.name for p in built.iterdir()) == [f"{mod}.so"], "only the module is kept for promotion"
    assert not (cache / "extensions" / "by-source").exists(), "a worker never writes by-source"


def test_a_failing_compile_is_a_result_with_the_compilers_message(tmp_path: Path) -> None:
    bad = (FIXTURES / "solutions" / "relu_compile_error.py").read_text()
    svc = _service(tmp_path / "cache")
    try:
        (fut,) = svc.submit_source(bad)
        res = fut.result(timeout=600)
    finally:
        svc.close()
    assert not res.ok and res.status is BuildStatus.FAILED
    assert "sm_90" in res.log_tail  # gcc: unrecognized command-line option '-arch=sm_90'
    assert not (tmp_path / "cache" / "extensions" / "by-source" / res.key).exists()


def test_a_module_the_symbol_check_refuses_is_built_but_never_published(tmp_path: Path) -> None:
    # __gthread_create passes the text scan; the module imports pthread_create (sandbox/build/symbols.py)
    hack = (FIXTURES.parent / "adversarial" / "native_symbols" / "starts_thread_through_gthread.py").read_text()
    svc = _service(tmp_path / "cache")
    try:
        (fut,) = svc.submit_source(hack)
        res = fut.result(timeout=900)
    finally:
        svc.close()
    assert not res.ok and res.status is BuildStatus.REFUSED, res.log_tail
    assert res.log_tail.startswith("policy_native: the built extension 'relu_gth' imports pthread_create")
    assert "symbols" in res.phases
    assert not (tmp_path / "cache" / "extensions" / "by-source" / res.key).exists()


@pytest.mark.parametrize("isolation", [Isolation.BWRAP, Isolation.NONE], ids=str)
def test_an_include_of_a_secret_file_fails_under_isolation(tmp_path: Path, isolation: Isolation) -> None:
    """Under bubblewrap the file is not there; without it the compiler confines its reads with Landlock first."""
    from kevolve.sandbox.isolate import landlock
    from kevolve.sandbox.isolate.bwrap import probe

    works, why = probe()
    if isolation is Isolation.BWRAP and not works:
        unavailable(why)
    if isolation is Isolation.NONE and landlock.abi() <= 0:
        pytest.skip("this kernel has no Landlock")
    secret = tmp_path / "home" / ".ssh" / "id_rsa"
    secret.parent.mkdir(parents=True)
    secret.write_text("SECRET-KEY-MATERIAL-4242\n")
    spec = ExtensionSpec(name="leak", cpp_sources=(f'static const char k[] = {{\n#include "{secret}"\n}};',),
                         no_implicit_headers=True)
    svc = _service(tmp_path / "cache", isolation)
    try:
        res = svc.submit(spec).result(timeout=300)
    finally:
        svc.close()
    assert not res.ok
    assert ("No such file" if isolation is Isolation.BWRAP else "Permission denied") in res.log_tail, res.log_tail
    assert "SECRET-KEY-MATERIAL" not in res.log_tail
    assert not (tmp_path / "cache" / "extensions" / "by-source" / res.key).exists()


def test_unsafe_flags_are_declined_not_compiled(tmp_path: Path) -> None:
    spec = ExtensionSpec(name="p", cpp_sources=("int x;",), extra_cflags=("-fplugin=/tmp/evil.so",))
    svc = _service(tmp_path / "cache", Isolation.NONE)
    try:
        res = svc.submit(spec).result(timeout=10)
    finally:
        svc.close()
    assert res.status is BuildStatus.DECLINED and not res.ok
    assert "-fplugin" in res.log_tail


def test_kernelbench_style_empty_and_joined_flags_build_in_the_service_and_in_the_worker(tmp_path: Path) -> None:
    """KernelBench's template passes extra_cflags=[""], extra_ldflags=[""]; torch's ninja line drops the
    empty flags and splits joined ones. On the H100 every such leaderboard kernel failed to link
    ("g++: error: : linker input file not found") until flags were split the same way."""
    flags = 'extra_cflags=["", "-O2 -DKV_TWO=2"], extra_ldflags=[""], verbose=False'
    src = RELU.replace("verbose=False", flags, 1)
    assert flags in src
    svc = _service(tmp_path / "cache", Isolation.NONE)
    try:
        (fut,) = svc.submit_source(src)
        res = fut.result(timeout=600)
    finally:
        svc.close()
    assert res.ok and res.status is BuildStatus.BUILT, res.log_tail  # not declined, not failed

    out = _build_in_worker(tmp_path / "cache2", tmp_path / "private", src,
                           "print(ns['ModelNew']()(torch.tensor([-1.0, 2.0])).tolist())")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "[0.0, 2.0]"
