"""Helpers for tests that run the real archive server (uvicorn in a subprocess) on loopback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

TOKEN = "integration-test-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(db_url: str, token: str | None = TOKEN, embedder: str = "hashing") -> Iterator[str]:
    """`kevolve archive serve` on a free loopback port; yields its base URL; stops it afterwards."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "KEVOLVE_API_TOKEN"}
    if token:
        env["KEVOLVE_API_TOKEN"] = token
    proc = subprocess.Popen([sys.executable, "-m", "kevolve.cli", "archive", "serve", "--db", db_url, "--port", str(port),
                             "--embedder", embedder], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(base + "/api/stats", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: {proc.stdout.read() if proc.stdout else ''}") from None
                time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def need(what: str, found: str | None) -> str:
    """``found``, or a skip outside CI / a failure on CI (where .ci/run must have installed it)."""
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is required on CI (.ci/run installs it)")
    pytest.skip(f"{what} not available here (.ci/run installs it on CI)")


def chromium() -> tuple[str, str]:
    """Paths of Debian's chromium and chromedriver (env KEVOLVE_CHROMIUM / KEVOLVE_CHROMEDRIVER or PATH)."""
    browser = os.environ.get("KEVOLVE_CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("KEVOLVE_CHROMEDRIVER") or shutil.which("chromedriver")
    return need("chromium", browser if browser and Path(browser).exists() else None), \
        need("chromedriver", driver if driver and Path(driver).exists() else None)
