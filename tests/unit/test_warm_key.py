"""The warm judge service's key and folder (sandbox/parent/warm_key.py), and the default device read without
importing torch (sandbox/config.py): pure functions of their inputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CPU_BUILD = "__version__ = '2.13.0+cpu'\ndebug = False\ncuda: Optional[str] = None\nhip: Optional[str] = None\n"
CUDA_BUILD = "__version__ = '2.13.0+cu130'\ncuda: Optional[str] = '13.0'\nhip: Optional[str] = None\n"
ROCM_BUILD = "__version__ = '2.13.0+rocm6.4'\ncuda: Optional[str] = None\nhip: Optional[str] = '6.4.1'\n"


def test_the_device_is_read_from_torchs_version_file_without_importing_it() -> None:
    from kevolve.sandbox.parent.device_probe import version_file_with_cuda, version_file_without_gpu

    assert version_file_without_gpu(CPU_BUILD)
    assert not version_file_without_gpu(CUDA_BUILD)
    assert not version_file_without_gpu(ROCM_BUILD)
    assert not version_file_without_gpu("")  # unknown: torch decides
    assert version_file_with_cuda(CUDA_BUILD)
    assert not version_file_with_cuda(CPU_BUILD) and not version_file_with_cuda(ROCM_BUILD)


def test_no_gpu_is_taken_for_granted_without_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    from kevolve.sandbox.parent.device_probe import cuda_surely_visible

    if Path("/proc/driver/nvidia/gpus").is_dir():
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # none left visible: torch must be asked
    assert not cuda_surely_visible("cuda") and not cuda_surely_visible("cuda:7")


def test_the_key_changes_with_what_the_judge_inherits_and_not_with_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from kevolve.sandbox.parent.warm_key import WarmKey

    base = WarmKey.of("cpu", "local", "auto").digest
    monkeypatch.setenv("PWD", "/somewhere/else")
    monkeypatch.setenv("COLUMNS", "211")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-key-the-judge-sees")
    assert WarmKey.of("cpu", "local", "auto").digest == base
    assert WarmKey.of("cpu", "local", "none").digest != base
    assert WarmKey.of(None, "local", "auto").digest != base  # "default" is resolved by the service, once
    monkeypatch.setenv("KEVOLVE_CONFINE_WRITES", "off")
    assert WarmKey.of("cpu", "local", "auto").digest != base
    monkeypatch.delenv("KEVOLVE_CONFINE_WRITES")
    monkeypatch.setenv("LD_PRELOAD", "/tmp/x.so")
    assert WarmKey.of("cpu", "local", "auto").digest != base


def test_the_service_folder_is_private(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kevolve.sandbox.parent.warm_key import DIR_ENV, WarmUnavailable, service_dir

    d = tmp_path / "warm"
    monkeypatch.setenv(DIR_ENV, str(d))
    assert service_dir() == d and (d.stat().st_mode & 0o777) == 0o700
    os.chmod(d, 0o755)
    with pytest.raises(WarmUnavailable, match="chmod 700"):
        service_dir()


def test_a_folder_inside_what_runners_may_read_is_refused(tmp_path: Path) -> None:
    from kevolve.sandbox.parent.warm_key import readable_by_runners

    cache = tmp_path / "cache"
    assert readable_by_runners(cache / "warm", cache) == str(cache.resolve())
    assert readable_by_runners(tmp_path / "elsewhere", cache) is None
    assert readable_by_runners(Path("/usr/share/kevolve-warm"), cache) == "/usr"


def test_the_service_gets_no_secret_and_no_archive_url(monkeypatch: pytest.MonkeyPatch) -> None:
    from kevolve.sandbox.parent.warm_key import service_env

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("KEVOLVE_DB", "postgresql://user:pw@db/kevolve")
    monkeypatch.setenv("KEVOLVE_LLM_API_KEY", "sk-other")
    monkeypatch.setenv("KEVOLVE_CACHE_DIR", "/some/cache")
    env = service_env()
    assert not {"ANTHROPIC_API_KEY", "KEVOLVE_DB", "KEVOLVE_LLM_API_KEY"} & set(env)
    assert env["KEVOLVE_CACHE_DIR"] == "/some/cache"  # the sandbox reads it


def test_files_of_gone_services_of_other_keys_are_swept_after_an_hour(tmp_path: Path) -> None:
    import time

    from kevolve.sandbox.parent import warm_client
    from kevolve.sandbox.parent.warm_key import ServiceFiles

    hour_ago = time.time() - 3700
    for suffix in (".lock", ".log", ".spawn", ".json"):
        p = tmp_path / f"oldkey{suffix}"
        p.write_text('{"pid": 999999999}' if suffix == ".json" else "")
        os.utime(p, (hour_ago, hour_ago))
    (tmp_path / "fresh.lock").write_text("")  # another key's, recent: perhaps starting now
    (tmp_path / "mine.lock").write_text("")
    warm_client._sweep(ServiceFiles(tmp_path, "mine"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.lock", "mine.lock"]
