"""`kevolve eval` through the warm judge service (sandbox/parent/warm_service.py), real processes throughout: the
real CLI, a real service, its real judge and runners. One service is shared by the file's tests in order (each
cold start is ~10 s on 2 cores); the last ones end it (a hang and a kill, then a service of another key that idles
out)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testpaths import FIXTURES

RELU = str(FIXTURES / "problems" / "relu.py")
HONEST = str(FIXTURES / "solutions" / "relu_reused_buffer.py")
WRONG = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
         "        return torch.relu(x) * 0.5\n")
ADVERSARY = Path(__file__).parent.parent / "adversarial" / "drives_warm_service.py"
KEYS: list[str] = []  # the shared service's key, as the first test found it


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One $HOME and one private service folder for the file; every service in it stopped at the end."""
    home = tmp_path_factory.mktemp("home")
    warm = home / "warm"
    warm.mkdir(mode=0o700)
    cache = home / "cache"  # its own: the compile baseline cached there is this file's to measure (no builds here)
    e = {**os.environ, "HOME": str(home), "KEVOLVE_CACHE_DIR": str(cache), "KEVOLVE_WARM_DIR": str(warm),
         "KEVOLVE_WARM_IDLE_S": "300"}
    e.pop("KEVOLVE_WARM", None)
    yield e
    subprocess.run([sys.executable, "-m", "kevolve.cli", "sandbox", "warm-stop"], env=e, capture_output=True,
                   timeout=60)


def kevolve(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kevolve.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**env, **extra})


def eval_cmd(solution: str, *flags: str) -> list[str]:
    return [sys.executable, "-m", "kevolve.cli", "eval", RELU, solution, "--device", "cpu", "--trials", "3",
            "--allow-torch-only", "--isolation", "none", "--json", *flags]


def evaluate(env: dict[str, str], solution: str, *flags: str, **extra: str) -> dict:
    r = subprocess.run(eval_cmd(solution, *flags), capture_output=True, text=True, timeout=300, env={**env, **extra})
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    out = json.loads(r.stdout)
    out["stderr"] = r.stderr
    return out


def services(env: dict[str, str]) -> list[dict]:
    r = kevolve(env, "sandbox", "warm-status", "--json")
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while True:
        try:
            os.kill(pid, 0)
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (ProcessLookupError, OSError):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def test_a_candidate_the_policy_refuses_is_answered_at_once_without_a_service(env: dict[str, str]) -> None:
    """Refused before anything is prepared or started: the warm service prepared the problem first (71 s on the
    H100, 26 s here for a refusal that needs nothing); first in the file, so no service runs yet."""
    secret_reader = str(Path(__file__).parent.parent / "adversarial" / "reads_secret_env.py")
    out = evaluate(env, secret_reader)
    assert out["status"] == "rejected" and out["reason"].startswith("policy_environment"), out["reason"]
    assert out["warm"] is None and services(env) == []  # no service was started for it


def test_two_evaluations_at_once_start_one_service_and_get_cold_verdicts(env: dict[str, str], tmp_path: Path) -> None:
    """Two `kevolve eval`s started together: one starts the service, the other waits for it (or queues behind the
    first evaluation); an honest candidate is ok and a wrong one incorrect, as cold (test_cli_eval.py)."""
    wrong = tmp_path / "wrong.py"
    wrong.write_text(WRONG)
    procs = [subprocess.Popen(eval_cmd(sol), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for sol in (HONEST, str(wrong))]
    runs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _out, err in runs]
    honest, bad = (json.loads(out) for out, _err in runs)
    assert [err for _out, err in runs] == ["", ""]
    assert honest["status"] == "ok", honest["reason"]
    assert bad["status"] == "incorrect" and bad["reason"].startswith("incorrect: ") and bad["speedup"] is None
    assert honest["warm"]["pid"] == bad["warm"]["pid"]  # one service, both served
    assert sorted((honest["warm"]["served"], bad["warm"]["served"])) == [1, 2]
    assert {"status", "reason", "speedup", "runtime_ms", "ref_runtime_ms", "checks", "device"} <= set(bad)
    KEYS.extend(s["key"] for s in services(env))


def test_a_candidate_in_a_runner_cannot_reach_or_drive_the_service(env: dict[str, str], tmp_path: Path) -> None:
    from kevolve.sandbox.isolate import landlock

    if landlock.abi() <= 0:
        pytest.skip("no Landlock here: with isolation none a candidate can read what the user can")
    (before,) = services(env)
    warm = Path(env["KEVOLVE_WARM_DIR"])
    known = [str(warm / f"{before['key']}.sock"), str(warm / f"{before['key']}.token")]
    hack = tmp_path / "hack.py"
    hack.write_text(ADVERSARY.read_text().replace("KNOWN: list[str] = []", f"KNOWN: list[str] = {known!r}"))
    out = evaluate(env, str(hack), "--allow", "all")
    assert out["status"] == "ok", out["reason"]  # it learned nothing (it fails to construct if it does)
    assert out["warm"]["pid"] == before["pid"] and out["warm"]["served"] == before["served"] + 1
    # its socket() was refused by the runner's seccomp filter: no connection reached the service at all
    assert "refused a connection" not in (warm / f"{before['key']}.log").read_text()


def test_the_service_refuses_a_peer_that_descends_from_a_kevolve_runner() -> None:
    """The layer behind Landlock and seccomp (sandbox/parent/warm_service.py `peer_refusal`): a connection's peer,
    known by the kernel (SO_PEERCRED), is refused when any ancestor is a kevolve judge or runner; a user's process
    is served. The listening side runs in its own process (as the service does), a sibling of the clients."""
    import subprocess
    import sys
    import time

    server = ("import socket, sys\nfrom kevolve.sandbox.parent.warm_service import peer_refusal\n"
              "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(sys.argv[1]); s.listen(1)\n"
              "print('listening', flush=True); s.settimeout(60); c, _ = s.accept(); print(repr(peer_refusal(c)))\n")

    def peer_of(argv: list[str]) -> str:
        path = f"/tmp/kevolve-peer-{time.monotonic_ns()}.sock"
        srv = subprocess.Popen([sys.executable, "-c", server, path], stdout=subprocess.PIPE, text=True)
        client = None
        try:
            assert srv.stdout is not None and srv.stdout.readline().strip() == "listening"
            code = f"import socket, time; s = socket.socket(socket.AF_UNIX); s.connect({path!r}); time.sleep(5)"
            client = subprocess.Popen([*argv, sys.executable, "-c", code])
            return srv.communicate(timeout=60)[0].strip()
        finally:
            for proc in (client, srv):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
            Path(path).unlink(missing_ok=True)

    assert peer_of([]) == "None"  # the user's own process (this test's child)
    # the same client under a process whose command line is a kevolve runner's (bash -c stays its parent)
    why = peer_of(["bash", "-c", '"$@"; true', "python -m kevolve.sandbox.runner.serve cpu"])
    assert "descends from a kevolve judge or runner" in why, why


def test_a_problems_torch_compile_baseline_is_measured_once_in_the_services_life(env: dict[str, str]) -> None:
    """The compile baseline (10.7 s of a cold H100 evaluation) is measured at the first evaluation of a problem that
    asks for it, then reused, labelled as the cached baseline, as bench and optimize do (BaselineCache, on disk)."""
    first = evaluate(env, HONEST, "--compile-baseline", "on")
    second = evaluate(env, HONEST, "--compile-baseline", "on")
    assert first["status"] == second["status"] == "ok", (first["reason"], second["reason"])
    assert first["warm"]["pid"] == second["warm"]["pid"] and second["warm"]["prepared_ahead"]
    assert first["compile_ms"] and "(cached baseline)" not in first["compile_ref_timing"]["method"]
    assert second["compile_ref_timing"]["method"] == first["compile_ref_timing"]["method"] + " (cached baseline)"
    assert second["compile_ms"] == first["compile_ms"]
    assert second["eager_ms"] != first["eager_ms"]  # eager is timed in every evaluation, beside the candidate


def test_a_hung_or_killed_service_is_left_for_a_cold_verdict(env: dict[str, str], tmp_path: Path) -> None:
    """The service stopped (SIGSTOP) under two clients: the one that allows 2 s of silence calls it hung and kills
    it, which ends the other's connection mid-request. Both verdicts come cold, each with one line on stderr."""
    (svc,) = services(env)
    wrong = tmp_path / "wrong.py"
    wrong.write_text(WRONG)
    os.kill(svc["pid"], signal.SIGSTOP)
    try:
        waiting = subprocess.Popen(eval_cmd(str(wrong)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**env, "KEVOLVE_WARM_HANG_S": "120"})
        time.sleep(1.0)
        hasty = evaluate(env, str(wrong), KEVOLVE_WARM_HANG_S="2")
        out, err = waiting.communicate(timeout=300)
    finally:
        if not gone(svc["pid"], 0):
            os.kill(svc["pid"], signal.SIGKILL)
    assert waiting.returncode == 0 and "Traceback" not in err, err
    killed = {**json.loads(out), "stderr": err}
    for run, why in ((hasty, "(no word from the warm judge"), (killed, "(the warm judge closed the connection")):
        assert run["status"] == "incorrect", run["reason"]  # the cold verdict, the same as the warm one above
        assert run["warm"] is None
        note = run["stderr"].strip()
        assert note.count("\n") == 0 and note.startswith("kevolve: warm judge unavailable " + why) \
            and note.endswith("evaluating cold"), note
    assert gone(svc["pid"], 10) and services(env) == []  # the next evaluation starts a fresh one


def test_another_key_is_another_service_and_an_idle_one_exits(env: dict[str, str]) -> None:
    out = evaluate(env, HONEST, "--warm-idle", "2", KEVOLVE_CONFINE_WRITES="on")  # configures the judge
    assert out["status"] == "ok" and out["warm"]["served"] == 1
    (svc,) = services(env)
    assert svc["pid"] == out["warm"]["pid"] and KEYS and svc["key"] not in KEYS
    assert gone(svc["pid"], 40)  # idle for 2 s after preparing the next problem: it exits by itself
    assert not list(Path(env["KEVOLVE_WARM_DIR"]).glob("*.sock"))
