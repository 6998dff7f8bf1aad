"""The problem's reference in a runner of its own (runs in the judge): eager or torch.compile'd, trusted code that
is called, staged and timed by the judge's clock exactly as a candidate is, so both sides' windows hold the same."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

import torch

from kevolve.records import TimingStats
from kevolve.sandbox.common import harness as h
from kevolve.sandbox.judge.clock import EMPTY_EVERY, FENCE, Window, batch_room, batch_size, call_times, method
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.judge.oracle import ProblemState
from kevolve.sandbox.common.protocol import RunnerJob, StepResult
from kevolve.sandbox.judge.runner_proc import Gone, RunnerProcess
from kevolve.sandbox.common.timing import stats
from kevolve.sandbox.judge.schedule import enough
from kevolve.sandbox.judge.facts import ForgedAnswer
from kevolve.sandbox.judge.flush import Flusher
from kevolve.sandbox.judge.gated import Gate, enabled as gated_on, request as gated_request

from kevolve.sandbox.judge.slots import Slots, _plain, staging_sets

STARTUP_S = 300.0  # a runner importing torch can take a minute on a loaded machine

def encode_args(args: list[Any]) -> dict[str, Any]:
    """get_init_inputs() for a runner: plain values only (a tensor there would need sharing)."""
    return {"seq": [{"value": _plain(a)} for a in args], "tuple": False}


class ReferenceRunner:
    """The problem's Model (eager, or torch.compile'd) in a runner of its own: trusted code, timed alike."""

    def __init__(self, take_runner: Callable[[SandboxConfig], RunnerProcess], device: torch.device, threads: int,
                 state: ProblemState, config: SandboxConfig, role: str) -> None:
        self.state, self.role = state, role
        self.cuda = device.type == "cuda"
        self.spoiled = False  # an answer it did not write was read from its channel
        self.last_window_ms = 0.0
        self.last_cpu: tuple[float, float] | None = None
        t0 = time.monotonic()
        self.runner = take_runner(config)
        folder = None if device.type == "cuda" else self.runner.scratch
        timing = state.keys("timing")  # copied into a slot just before their call, as the candidate's are
        # As many calls as a timed batch may hold (clock.py; the session's batches are no longer): a slot of
        # its own for each never-seen draw of a batch, and a staging set for each call. The reference stages
        # its outputs as a candidate does (not compared: trusted), so that both sides' windows hold the same.
        self.room = batch_room(state.call_bytes(), device.type, max(1, len(timing) // 5) if timing else 0
                               ) if state.residency == "device" else 1
        fresh = state.keys("fresh")  # its calls alone on them (a diagnostic beside the candidate's, Session._fresh)
        self.slots = Slots(state.pristine(state.pool + timing + fresh), True, folder, device,
                           hidden=timing + fresh, min_slots=self.room if timing else 1)
        self.staging = staging_sets(state, self.room, folder, device)
        # gated as the candidate's are, so that both windows hold the same work (gated.py)
        self.gate = Gate(self.runner.scratch, self.staging, self.slots, device) \
            if gated_on(self.cuda) and self.room > 1 else None
        job = RunnerJob(role=role, source=state.problem.source, init_seed=state.seed,  # type: ignore[arg-type]
                        init_args=encode_args(state.init_args), slots=self.slots.encodings(),
                        staging=tuple(s.ref.model_dump() for s in self.staging[0]),
                        staging_sets=tuple(tuple(s.ref.model_dump() for s in st) for st in self.staging[1:]),
                        outputs=state.specs, cache_dir=str(config.cache_dir), threads=threads,
                        gate=self.gate.name if self.gate is not None else None)
        gone = self.runner.wait_warm(STARTUP_S)
        if gone is not None:
            raise h.StageError("infra_error", f"the {role} runner failed to start: {gone.log_tail[-200:]}")
        self.runner.watch(config.memory_limit_gb)
        self.limit_gb = config.memory_limit_gb
        limit = config.timeout_s * (4 if role == "compiled" else 1)
        msg = self.runner.request(job.model_dump(), time.monotonic() + limit)
        if not (isinstance(msg, dict) and msg.get("op") == "ready"):
            raise h.StageError("problem_error", _over(msg, role, self.limit_gb)
                               or (f"timeout: the {role} reference did not load within the time limit (--timeout "
                                   f"{limit:g} s); raise --timeout" if isinstance(msg, Gone) and msg.timed_out else
                                   f"the reference failed to load in its runner: {_why(msg)}"))
        self.slots.hide()  # mapped by the runner: no name another process could open them by
        if self.gate is not None:
            self.gate.hide()
        for st in self.staging:
            for b in st:
                b.hide()
        self.start_s = time.monotonic() - t0  # waiting for a warm runner, then loading the model there

    def call(self, key: str, deadline: float, op: str = "call", pad_ms: float = 0.05) -> StepResult:
        """One call of the reference; ForgedAnswer when an answer does not echo the call's nonce.

        `last_window_ms`: the judge's clock from the command to the runner's account (its vetting
        comes after), the same window session.Session.call times a candidate's call in."""
        i = self.slots.slot_for(key)
        nonce = secrets.randbits(62) + 1
        cpu0 = self.runner.precise_cpu_seconds()
        t0 = time.perf_counter()
        msg = self.runner.request({"op": op, "slot": i, "pad_ms": pad_ms, "nonce": nonce}, deadline)
        self.last_window_ms = (time.perf_counter() - t0) * 1e3
        cpu_a = self.runner.precise_cpu_seconds()
        res = self._read(msg, nonce, "call")
        self._read(self.runner.receive(deadline), nonce, "vet")
        cpu_v = self.runner.precise_cpu_seconds()
        # its CPU in the call's window and in the vetting after it (session.Session.call: the candidate's)
        self.last_cpu = None if None in (cpu0, cpu_a, cpu_v) else (cpu_a - cpu0, cpu_v - cpu_a)  # type: ignore[operator]
        return res

    def batch(self, keys: list[str], deadline: float, flush: Any = None, null: int = 0) -> Window:
        """A batch of calls of the reference on these draws, timed by the judge's clock (clock.py) from after
        its draws are copied in and the caches flushed (`flush`), as a candidate's that is frozen meanwhile; its
        CPU in the window and in the vetting (`last_cpu`), as `call`'s."""
        nonce = secrets.randbits(62) + 1
        cpu0 = self.runner.precise_cpu_seconds()
        calls = len(keys) or null  # null: calls of the harness alone (clock.harness_ms)
        gate = self.gate if self.gate is not None and (self.gate.gates(keys) or (not keys and null > 1)) else None
        if gate is not None:
            gate.prepare(keys)
        picks = self.slots.slots_for(keys, 1 if gate is not None else None)
        if flush is not None:
            flush()
        t0 = time.perf_counter()
        cmd = {"op": "batch", "slots": picks, "stage": list(range(calls)), "nonce": nonce, "fence": FENCE,
               "null": 0 if picks else null, "gate": gate is not None}
        msg = self.runner.request(cmd, deadline) if gate is None else \
            gated_request(self.runner, gate, cmd, deadline, calls, gate.between(keys, picks))
        self.last_window_ms = (time.perf_counter() - t0) * 1e3
        cpu_a = self.runner.precise_cpu_seconds()
        res = self._read(msg, nonce, "call")
        self.runner.send({"op": "vet"})  # its vetting waits for this (runner/serve.py)
        self._read(self.runner.receive(deadline), nonce, "vet")
        cpu_v = self.runner.precise_cpu_seconds()
        self.last_cpu = None if None in (cpu0, cpu_a, cpu_v) else (cpu_a - cpu0, cpu_v - cpu_a)  # type: ignore[operator]
        cpu_ms = None if self.cuda or cpu0 is None or cpu_a is None else (cpu_a - cpu0) * 1e3
        return Window(self.last_window_ms, calls, res.host_ms, cpu_ms)

    def _read(self, msg: dict[str, Any] | Gone, nonce: int, part: str) -> StepResult:
        if isinstance(msg, Gone) or not msg.get("ok"):
            raise h.StageError("problem_error", _over(msg, self.role, self.limit_gb)
                               or (f"timeout: a call of the {self.role} reference took longer than the time limit "
                                   "(--timeout); raise --timeout" if isinstance(msg, Gone) and msg.timed_out else
                                   f"the reference failed in its runner: {_why(msg)}"))
        try:
            res = StepResult.model_validate(msg)
        except ValueError:
            res = None
        if res is None or res.nonce != nonce or res.part != part:
            # The reference's runner is trusted code that echoes every nonce: another process wrote this
            # answer into its channel (a candidate run without bubblewrap, which reaches the user's other
            # processes). Its channel is out of step from here on: the problem is prepared again.
            self.spoiled = True
            raise ForgedAnswer("rejected", f"tampering: an answer in the {self.role} reference's channel that its "
                                           "runner did not write (it does not echo the call's nonce)")
        return res

    def time(self, config: SandboxConfig, flush: Flusher, first_deadline: float) -> TimingStats:
        """Time the model alone (the problem's session baseline), as candidates are timed."""
        pool = self.state.pool
        for i in range(max(1, config.warmup)):
            flush()
            self.call(pool[i % len(pool)], first_deadline if i == 0 else time.monotonic() + config.timeout_s)
        # by the judge's clock, in batches as a candidate's are timed (clock.py): from the last warm-up
        # call's own time (trusted code), as many calls as hold BATCH_MS, on distinct slots
        est = self.call(pool[0], time.monotonic() + config.timeout_s).host_ms
        n = min(batch_size(est, self.state.call_bytes(), "cuda" if self.cuda else "cpu", 0), self.room)
        windows: list[Window] = []
        empties: list[Window] = []
        t0 = time.monotonic()
        while True:
            if len(windows) % EMPTY_EVERY == 0:
                empties.append(self.batch([], time.monotonic() + config.timeout_s, flush))
            keys = [pool[(len(windows) * n + k) % len(pool)] for k in range(n)]
            windows.append(self.batch(keys, time.monotonic() + config.timeout_s, flush))
            times = call_times(windows, empties, [])
            # its own time sizes the candidates' batches and too_slow, nothing finer: the speedup reads the
            # reference's batches interleaved with each candidate's (Session._timing)
            if enough(times, [], config.trials, time.monotonic() - t0, min(config.max_timing_s, _SUMMARY_S)):
                break
        return stats(times, method(config.is_cuda) + f"+batches_of_{n}")

    def close(self) -> None:
        self.runner.close()
        self.slots.free()
        for st in self.staging:
            for b in st:
                b.free()
        self.runner.finish()


_SUMMARY_S = 2.0  # at most this long timing a reference alone (its problem's summary), past five batches


def _over(msg: Any, role: str, limit_gb: float) -> str | None:
    """The memory_limit reason when the reference's runner ended over its memory limit, else None."""
    if not (isinstance(msg, Gone) and msg.memory_exceeded):
        return None
    return (f"memory_limit: the {role} reference's runner went over the limit of {limit_gb:.1f} GiB per process "
            f"(--memory-limit-gb) {msg.memory_note or 'with this problem’s inputs and outputs'}")


def _why(msg: Any) -> str:
    if isinstance(msg, Gone):
        if msg.timed_out:  # the user's limit, not the reference's fault: no log line of the harness's (issue 37)
            return "it took longer than the time limit (--timeout); raise --timeout"
        last = (msg.log_tail.strip().splitlines() or [""])[-1][:200]
        return f"runner exit {msg.returncode}: {last}"
    return str((msg or {}).get("reason") or msg)[:300]


__all__ = ["STARTUP_S", "ReferenceRunner", "encode_args"]
