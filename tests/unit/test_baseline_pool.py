"""The baseline pool's scheduling, with `sleep` processes standing in for baseline workers.

What it must hold: several workers alive at once (--jobs), never two timed at once, the others
paused (SIGSTOP) while one is timed and running again afterwards, and the admitted memory estimates
within the budget unless a problem runs alone.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kevolve.sandbox.parent.baseline_pool import BaselinePool, PoolSettings, admissible
from kevolve.kernelbench.suite import SuiteProblem
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.isolate.launch import WorkerExit
from kevolve.sandbox.common.protocol import WorkerReport, WorkerRequest

GB = 2**30


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@dataclass
class Seen:
    """What the stand-ins observed while the pool drove them."""

    alive: list[FakeWorker] = field(default_factory=list)
    max_alive: int = 0
    admitted: dict[str, int] = field(default_factory=dict)
    peak: list[tuple[int, int]] = field(default_factory=list)  # (bytes admitted, how many) at each admission
    others_stopped: list[tuple[int, int]] = field(default_factory=list)  # per timing: (other workers, stopped)
    self_stopped: list[bool] = field(default_factory=list)  # per timing: was the timed one stopped? (never)
    windows: list[tuple[float, float]] = field(default_factory=list)


class FakeWorker:
    """A `sleep` process as a worker: sized at once, prepared as soon as admitted, 'timed' for 50 ms."""

    def __init__(self, name: str, need: int | None, seen: Seen, root: Path) -> None:
        self.name, self._need, self.seen = name, need, seen
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(["sleep", "60"], start_new_session=True)
        self.scratch = root / name
        self.scratch.mkdir()
        self.admitted = False
        seen.alive.append(self)
        seen.max_alive = max(seen.max_alive, len(seen.alive))

    def need(self) -> tuple[bool, int | None]:
        return True, self._need

    def admit(self) -> None:
        self.admitted = True
        self.seen.admitted[self.name] = self._need or 0
        self.seen.peak.append((sum(self.seen.admitted.values()), len(self.seen.admitted)))

    def phase(self) -> str:
        return "waiting" if self.admitted else "sized"

    def run(self, request: WorkerRequest, timeout_s: float, memory_limit_gb: float) -> WorkerExit:
        assert self.proc is not None
        others = [w for w in self.seen.alive if w is not self]
        stopped = sum(_state(w.proc.pid) == "T" for w in others)  # type: ignore[union-attr]
        self.seen.others_stopped.append((len(others), stopped))
        self.seen.self_stopped.append(_state(self.proc.pid) == "T")
        start = time.time()
        time.sleep(0.05)
        self.seen.windows.append((start, time.time()))
        report = WorkerReport(status="done", timed_window=(start, time.time()))
        return WorkerExit(report=report, returncode=0, timed_out=False, memory_exceeded=False, elapsed_s=0.05,
                          log_tail="", phase="reporting")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self in self.seen.alive:
            self.seen.alive.remove(self)
        self.seen.admitted.pop(self.name, None)


def _run(tmp_path: Path, needs: list[int | None], settings: PoolSettings) -> tuple[Seen, list]:
    seen = Seen()
    config = SandboxConfig(device="cpu", cache_dir=tmp_path / "cache")
    problems = []
    for i, need in enumerate(needs):
        sp = SuiteProblem(level=1, number=i + 1, file=f"{i + 1}_p.py", path=str(tmp_path / f"{i + 1}_p.py"))
        req = WorkerRequest(task="reference", problem_source=f"p{i}", device="cpu", init_seed=0, draws=(),
                            cache_dir=str(tmp_path))
        problems.append((sp, req))
    by_source = dict(zip((r.problem_source for _, r in problems), needs, strict=True))
    pool = BaselinePool(problems, config, settings,
                        start=lambda req, cores, threads: FakeWorker(req.problem_source, by_source[req.problem_source],
                                                                     seen, tmp_path))
    return seen, list(pool.results())


def test_pool_keeps_jobs_workers_alive_times_one_at_a_time_and_pauses_the_others(tmp_path: Path) -> None:
    seen, results = _run(tmp_path, [GB] * 6, PoolSettings(jobs=3, memory_budget=100 * GB))
    assert sorted(r.problem.number for r in results) == [1, 2, 3, 4, 5, 6]
    assert all(r.exit is not None and not r.pending for r in results)
    assert seen.max_alive == 3
    assert all(n == stopped for n, stopped in seen.others_stopped)
    assert sum(n for n, _ in seen.others_stopped) >= 6  # the others were there to pause
    assert not any(seen.self_stopped)  # the timed one was never left stopped by an earlier pause
    windows = sorted(seen.windows)
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:]))


def test_pool_without_pausing_lets_the_others_run_while_one_is_timed(tmp_path: Path) -> None:
    seen, results = _run(tmp_path, [GB] * 4, PoolSettings(jobs=2, memory_budget=100 * GB, pause_prep=False))
    assert len(results) == 4
    assert sum(n for n, _ in seen.others_stopped) >= 2 and not any(stopped for _, stopped in seen.others_stopped)


def test_pool_admits_within_the_memory_budget_and_runs_an_oversized_problem_alone(tmp_path: Path) -> None:
    needs = [6 * GB, 6 * GB, GB, GB, 20 * GB, GB, None, GB]  # 20 GB > budget; None: no estimate
    seen, results = _run(tmp_path, needs, PoolSettings(jobs=4, memory_budget=8 * GB))
    assert len(results) == len(needs)
    assert all(total <= 8 * GB or count == 1 for total, count in seen.peak)
    assert seen.max_alive == 4


def test_pool_stops_at_its_time_limit_and_reports_the_rest_pending(tmp_path: Path) -> None:
    _seen, results = _run(tmp_path, [GB] * 200, PoolSettings(jobs=2, memory_budget=100 * GB, time_limit_s=1.0))
    done = [r for r in results if not r.pending]
    assert 0 < len(done) < 200 and len(results) == 200
    assert {r.problem.number for r in results} == set(range(1, 201))


@pytest.mark.parametrize(("need", "held", "budget", "ok"), [
    (10 * GB, 0, GB, True),  # nothing admitted: anything goes, alone
    (None, 0, GB, True),
    (None, GB, 8 * GB, False),  # unknown size waits until it can run alone
    (3 * GB, 5 * GB, 8 * GB, True),
    (4 * GB, 5 * GB, 8 * GB, False),
])
def test_admissible_lets_a_problem_prepare_only_within_the_budget_or_alone(need: int | None, held: int, budget: int,
                                                                           ok: bool) -> None:
    assert admissible(need, held, budget) is ok
