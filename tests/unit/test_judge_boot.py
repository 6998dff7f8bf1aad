"""The judge's entry (sandbox/judge/boot.py) starts its first runners before it imports torch, from the runner
settings the parent hands it (config.RUNNER_FIELDS and the device: no seed, nothing secret). Real runner processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testpaths import BUILD_CACHE

PROBE = """
import json, sys
from kevolve.sandbox.config import RUNNER_FIELDS, SandboxConfig
from kevolve.sandbox.judge.boot import early_runners
from kevolve.sandbox.judge.runner_proc import runner_key

full = SandboxConfig(device="cpu", isolation="none", cache_dir=sys.argv[1], seed=1234, trials=7)
settings = sys.argv[3] if len(sys.argv) > 3 else full.model_dump_json(include=set(RUNNER_FIELDS) | {"device"})
early = early_runners(["boot", "cpu", "", "", "3,4", "1", "", sys.argv[2], settings])
report = {"n": len(early), "torch": "torch" in sys.modules, "seed_passed": "1234" in settings,
          "keys": [k == runner_key(full) for k, _r in early]}
report["warm"] = [r.wait_warm(120) is None for _k, r in early]
for _k, r in early:
    r.finish()
print(json.dumps(report))
"""


def probe(tmp_path: Path, *settings: str) -> tuple[dict, str]:
    r = subprocess.run([sys.executable, "-c", PROBE, str(BUILD_CACHE), str(tmp_path), *settings],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_the_first_runners_start_before_torch_and_serve_the_full_configuration(tmp_path: Path) -> None:
    got, _err = probe(tmp_path)
    # two: the eager reference's and the first candidate's (one spare wanted, plus one for a new problem)
    assert got == {"n": 2, "torch": False, "seed_passed": False, "keys": [True, True], "warm": [True, True]}


def test_containers_or_unreadable_settings_start_nothing_and_say_why(tmp_path: Path) -> None:
    got, _err = probe(tmp_path, json.dumps({"device": "cpu", "backend": "docker"}))
    assert got["n"] == 0 and not got["torch"]
    got, err = probe(tmp_path, "{not json")
    assert got["n"] == 0 and "no runner started ahead" in err
