"""The compile pool: build a candidate's extensions ahead of its evaluation, on CPU cores only.

A prebuild imports the candidate module in an isolated process (scrubbed environment, its own
process group, containment and scratch folder, no GPU visible) with the sandbox's build hooks installed, so its
`load_inline` builds land in the content-addressed build cache. The evaluation worker then finds
them built. Nothing here is a verdict: whatever happens, the evaluation decides.

Entry point: `python -m kevolve.kernelbench.prebuild CACHE_DIR` in a folder holding candidate.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Prebuilt:
    """How one prebuild went (for the log and the throughput numbers, never for scoring)."""

    ok: bool
    seconds: float
    detail: str = ""


def prebuild(source: str, cache_dir: Path, timeout_s: float = 600.0) -> Prebuilt:
    """Run the candidate's module-level code (its builds) in a throwaway process.

    The child inherits the calling thread's CPU affinity: the runner pins its compile threads to
    cores that no evaluation is timed on.
    """
    from kevolve.sandbox.containment import contain
    from kevolve.sandbox.isolation import scrubbed_env

    if "load_inline" not in source and "cpp_extension" not in source:
        return Prebuilt(True, 0.0, "nothing to build")
    scratch = Path(tempfile.mkdtemp(prefix="kevolve-prebuild-"))
    t0 = time.monotonic()
    contained = contain(scratch.name)  # the candidate's module code runs here: it may start daemons
    try:
        (scratch / "candidate.py").write_text(source)
        env = scrubbed_env("cpu", scratch)
        env["CUDA_VISIBLE_DEVICES"] = ""  # the compile pool never touches a GPU
        with open(scratch / "build.log", "wb") as logf:
            proc = subprocess.Popen(
                contained.wrap([sys.executable, "-m", "kevolve.kernelbench.prebuild", str(cache_dir)]),
                cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                start_new_session=True)
        contained.started(proc.pid)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait()
        tail = (scratch / "build.log").read_text(errors="replace").strip().splitlines()[-1:] or [""]
        return Prebuilt(code == 0, time.monotonic() - t0,
                        "timeout" if code is None else ("" if code == 0 else tail[0][:200]))
    finally:
        contained.kill_all()  # whatever it left running, wherever it went
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    cache_dir = Path(sys.argv[1])
    import importlib.util

    import torch  # noqa: F401 - the candidate imports it anyway; fail here if torch is broken

    from kevolve.sandbox.compile import install_build_hooks

    install_build_hooks(cache_dir)
    spec = importlib.util.spec_from_file_location("kevolve_prebuild_candidate", Path.cwd() / "candidate.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except BaseException as e:  # noqa: BLE001 - the evaluation will report it properly
        print(f"prebuild: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
        os._exit(1)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
