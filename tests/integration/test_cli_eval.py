"""`kevolve eval` through the real CLI: malformed problems are one-line usage errors (exit 2),
malformed candidates are verdicts (exit 0), and --json prints exactly one contract object."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import BUILD_CACHE, FIXTURES

GOOD_TAIL = "\ndef get_inputs():\n    return [torch.randn(8, 16)]\n\ndef get_init_inputs():\n    return []\n"
MODEL = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"

BAD_PROBLEMS = {
    "syntax_error": ("import torch\nclass Model(nn.Module)\n    pass\n" + GOOD_TAIL, "syntax error at line 2"),
    "missing_names": (MODEL + "\ndef get_inputs():\n    return [torch.randn(8)]\n", "missing get_init_inputs"),
    "wrong_constructor": (MODEL + GOOD_TAIL.replace("return []", "return [3, 4]"), "Model(*get_init_inputs()) failed"),
    "get_inputs_raises": (MODEL + GOOD_TAIL.replace("return [torch.randn(8, 16)]", "raise RuntimeError('no data')"),
                          "get_inputs() raised RuntimeError: no data"),
}


def kevolve_eval(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "kevolve.cli", "eval", *args, "--device", "cpu", "--trials", "3", "--seed", "5"]
    # $HOME of its own (nothing of the user's is touched); builds in the tests' shared build cache, where other
    # tests have built relu_cpp (a cold build is a minute or two on 2 loaded cores)
    env = {**os.environ, "HOME": str(cache), "KEVOLVE_CACHE_DIR": str(BUILD_CACHE)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def assert_one_line_usage_error(r: subprocess.CompletedProcess[str], text: str) -> None:
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    assert r.stderr.startswith("error: ") and r.stderr.strip().count("\n") == 0, r.stderr
    assert "Traceback" not in r.stderr and text in r.stderr


@pytest.mark.parametrize("case", sorted(BAD_PROBLEMS))
def test_malformed_problem_is_a_one_line_error(case: str, fixtures: Path, tmp_path: Path) -> None:
    source, text = BAD_PROBLEMS[case]
    problem = tmp_path / f"{case}.py"
    problem.write_text(source)
    r = kevolve_eval(str(problem), str(fixtures / "solutions" / "relu_cpp.py"), cache=tmp_path)
    assert_one_line_usage_error(r, text)


def test_missing_problem_file_is_a_one_line_error(fixtures: Path, tmp_path: Path) -> None:
    r = kevolve_eval(str(tmp_path / "absent.py"), str(fixtures / "solutions" / "relu_cpp.py"), cache=tmp_path)
    assert_one_line_usage_error(r, "no such file")


BAD_CANDIDATES = {
    "syntax_error": ("import torch\nclass ModelNew(\n", "compile_error", "syntax error at line 2"),
    "no_modelnew": ("import torch\nclass Model:\n    pass\n", "compile_error", "no ModelNew"),
    "wrong_constructor": ("import torch.nn as nn\nclass ModelNew(nn.Module):\n    def __init__(self, n):\n"
                          "        super().__init__()\n", "runtime_error", "ModelNew(*get_init_inputs()) failed"),
}


@pytest.mark.parametrize("case", sorted(BAD_CANDIDATES))
def test_malformed_candidate_is_a_verdict_with_exit_code_0(case: str, fixtures: Path, tmp_path: Path) -> None:
    source, status, text = BAD_CANDIDATES[case]
    solution = tmp_path / "solution.py"
    solution.write_text(source)
    r = kevolve_eval(str(fixtures / "problems" / "relu.py"), str(solution), "--json", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == status and out["reason"].startswith(f"{status}: ")
    assert text in out["reason"] and "\n" not in out["reason"]
    assert out["speedup"] is None


def test_a_reason_that_cannot_be_written_as_utf8_is_still_printed(fixtures: Path, tmp_path: Path) -> None:
    # red team (2026-11-26): lone surrogates in a candidate's exception text reached the reason, and the
    # plain report could not write them: `error: kevolve failed: UnicodeEncodeError`, no verdict
    solution = tmp_path / "solution.py"
    solution.write_text("import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                        "        raise ValueError('bad \\udcff\\ud800 text')\n")
    r = kevolve_eval(str(fixtures / "problems" / "relu.py"), str(solution), cache=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "runtime_error" in r.stdout and "bad" in r.stdout and "kevolve failed" not in r.stderr + r.stdout


CONTRACT = {"status", "reason", "speedup", "runtime_ms", "ref_runtime_ms", "compile_ref_runtime_ms",
            "checks", "kernels", "device"}


def test_json_is_one_contract_object_and_a_rejection_exits_0(fixtures: Path, tmp_path: Path) -> None:
    torch_only = Path(__file__).parent.parent / "adversarial" / "torch_only.py"
    r = kevolve_eval(str(fixtures / "problems" / "relu.py"), str(torch_only), "--json", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 1 and r.stdout.endswith("}\n")  # exactly one JSON object, one line
    out = json.loads(r.stdout)
    assert CONTRACT <= set(out)
    assert out["status"] == "rejected" and out["reason"].startswith("no_custom_kernel: ")
    assert out["speedup"] is None
    assert out["runtime_ms"] > 0 and out["ref_runtime_ms"] > 0
    assert out["compile_ref_runtime_ms"] is None  # torch.compile baseline is off on the CPU by default
    assert out["baseline"] == "eager interleaved"  # timed alternately with the candidate, same judge session
    assert out["device"].startswith("cpu")
    assert out["kernels"] == []  # it launched no custom kernel
    names = {c["name"] for c in out["checks"]}
    assert {"correct:check", "correct:timed", "correct:fresh", "integrity"} <= names  # every call checked
    assert all(set(c) >= {"name", "passed", "detail"} for c in out["checks"])


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One $HOME (so one default build cache) for the tests that build relu_cpp: it is built once, not per test."""
    return tmp_path_factory.mktemp("home")


@pytest.mark.parametrize("on_call", [1, 4])
def test_a_reference_that_starts_a_thread_is_still_a_reference(fixtures: Path, tmp_path: Path, on_call: int,
                                                                shared_home: Path) -> None:
    """Trusted reference code may start threads: on its first call (torch.compile's compile workers did,
    and every compiled baseline on the H100 failed as background_thread; that call is made before the
    vetted ones, in the reference's runner only) or on a later one, among the vetted calls (torch.compile's
    reference of KernelBench L2 90 did, on the H100): the thread rule is for candidates only."""
    source = ("import threading, time\n" + MODEL.replace(
        "    def forward(self, x):\n",
        "    calls = 0\n\n    def forward(self, x):\n"
        f"        Model.calls += 1\n        if Model.calls == {on_call}:\n"
        "            threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n") + GOOD_TAIL)
    problem = tmp_path / "thread_starting_reference.py"
    problem.write_text(source)
    r = kevolve_eval(str(problem), str(fixtures / "solutions" / "relu_cpp.py"), "--json", cache=shared_home)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "ok", r.stdout


SCALAR = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
          "    def forward(self, x):\n        return torch.dot(x, x){}\n")


@pytest.mark.parametrize(("scale", "status"), [("", "ok"), (" * 1.01", "incorrect")])
def test_a_problem_whose_output_is_a_scalar_is_judged(fixtures: Path, tmp_path: Path, shared_home: Path, scale: str,
                                                      status: str) -> None:
    """Red team 9 (GPU, a cuBLAS dot): a 0-dim output had no byte view, and every problem with a scalar output
    (KernelBench's losses) ended `infra_error: judge failed … in fingerprint` on the CPU and the GPU alike."""
    solution = tmp_path / "dot.py"
    solution.write_text(SCALAR.format(scale))
    r = kevolve_eval(str(fixtures / "problems" / "sum_squares.py"), str(solution), "--json", "--allow-torch-only",
                     cache=shared_home)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == status, out["reason"]


SLEEPY = ("import time\nimport torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
          "    def forward(self, x):\n        time.sleep(0.7)\n        return torch.relu(x)\n")


def test_a_candidate_far_slower_than_the_reference_is_stopped_after_three_calls(fixtures: Path, tmp_path: Path) -> None:
    """0.7 s a call against a ReLU's microseconds: `timeout: too_slow` at the third call (the first is
    never counted: JIT builds happen there), where it used to be called and checked some 25 times more."""
    solution = tmp_path / "sleepy.py"
    solution.write_text(SLEEPY)
    r = kevolve_eval(str(fixtures / "problems" / "relu.py"), str(solution), "--json", "--allow", "all",
                     "--allow-torch-only", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "timeout" and out["reason"].startswith("too_slow: calls take 0.7"), out["reason"]
    assert "--max-slowdown" in out["reason"] and out["speedup"] is None
    checked = sum(int(c["detail"].split()[0]) for c in out["checks"] if c["passed"] and c["name"].startswith("correct:"))
    assert checked == 3, out["checks"]


ALTERNATING = ("import time\nimport torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
               "    n = 0\n    def forward(self, x):\n        ModelNew.n += 1\n"
               "        if ModelNew.n % 2:\n            time.sleep(0.7)\n        return torch.relu(x)\n")


def test_a_candidate_slow_on_every_other_call_is_stopped_as_soon(fixtures: Path, tmp_path: Path) -> None:
    """Red team 9: slow on every other call, never two in a row, it was called until the time limit. Two slow
    calls of any three stop it: by the fifth call."""
    solution = tmp_path / "alternating.py"
    solution.write_text(ALTERNATING)
    r = kevolve_eval(str(fixtures / "problems" / "relu.py"), str(solution), "--json", "--allow", "all",
                     "--allow-torch-only", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "timeout" and out["reason"].startswith("too_slow: calls take 0.7"), out["reason"]
    checked = sum(int(c["detail"].split()[0]) for c in out["checks"] if c["passed"] and c["name"].startswith("correct:"))
    assert checked <= 5, out["checks"]


def test_the_users_keys_are_not_in_the_environment_a_candidate_can_read(tmp_path) -> None:
    # `kevolve eval --no-warm` (and optimize) start the judge from the user's process, which holds the LLM keys in the
    # environment it was started with: a candidate under `none` read them from /proc/<pid>/environ (root, 6.18 kernel,
    # Landlock or not: `incorrect` before, its visible signal). The process now hides them there (procfs.hide_environ)
    # Red team 7: the shell that runs `kevolve eval` holds the key too (its first block is no process of kevolve's to
    # hide), read through /proc/<shell>/environ under Landlock, which left all of /proc readable; and a login in
    # PIP_INDEX_URL's address reached the runner under a name no list of secret names knows. Both `incorrect` before.
    hack = Path(__file__).resolve().parents[1] / "adversarial" / "reads_the_judges_memory.py"
    from kevolve.sandbox.isolate import landlock

    # a shell that stays, as a user's does (without Landlock its environment is within reach: nothing to test there)
    shell = ["sh", "-c", '"$@"; exit $?', "sh"] if landlock.abi() > 0 else []
    cmd = [*shell, sys.executable, "-m", "kevolve.cli", "eval", str(FIXTURES / "problems" / "relu.py"), str(hack), "--device",
           "cpu", "--isolation", "none", "--allow", "all", "--no-warm", "--json"]
    env = {**os.environ, "HOME": str(tmp_path), "KEVOLVE_CACHE_DIR": str(BUILD_CACHE),
           "OPENAI_API_KEY": "sk-kevolve-canary-0123456789",
           "PIP_INDEX_URL": "https://user:kevolve-canary-pip@pypi.example.com/simple"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    verdict = json.loads(r.stdout)
    assert verdict["status"] == "ok", verdict["reason"]
