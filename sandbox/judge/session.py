"""One candidate's evaluation, driven by the judge: every call the runner makes is checked.

The judge decides each call (which draw, which slot), flushes the caches itself, compares the staged outputs with
the truth on the device, checks that the inputs came back untouched, and keeps every time in its own memory. The
eager reference runs in its own runner on the same schedule, its calls interleaved with the candidate's, so both are
timed under the same conditions at the same moments. The runner never learns which phase a call belongs to."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

import torch

from kevolve.records import Candidate
from kevolve.sandbox.judge.checks import Call, check_call, classify
from kevolve.sandbox.judge.eta import Eta, plan_of
from kevolve.sandbox.judge.clock import EMPTY_EVERY, FENCE, NET, Window, batch_size, both_sides
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.judge.oracle import ProblemState
from kevolve.sandbox.common.protocol import RunnerFinal, StepResult
from kevolve.sandbox.judge.runner_proc import Gone, RunnerProcess
from kevolve.sandbox.judge.schedule import FRESH_EVERY, slow_limit_ms, stop_reason, too_slow_reason
from kevolve.sandbox.judge.facts import Facts, ForgedAnswer, Verdict
from kevolve.sandbox.judge.flush import Flusher, Pad
from kevolve.sandbox.judge.gated import Gate, enabled as gated_on, request as gated_request
from kevolve.sandbox.judge.slots import Slots, staging_sets
from kevolve.sandbox.judge.truths import DeviceTruths

_CPU_PHASES = ("timed", "fresh", "control", "empty")  # calls whose runner CPU time is read call by call (verdict.cpu_rule)


class Session:
    """Drives one candidate runner (and the problem's eager runner) through the schedule."""

    def __init__(self, state: ProblemState, runner: RunnerProcess, eager: Any, config: SandboxConfig,
                 device: torch.device, flush: Flusher, clock_calls: int = 0, eager_ms: float | None = None,
                 quiet: Callable[[], None] | None = None, timed: Callable[[], None] | None = None) -> None:
        self.clock_calls = clock_calls
        self.quiet = quiet or (lambda: None)  # waits until no runner is starting beside this session (judge/serve.py)
        self.timed = timed or (lambda: None)  # once the timed phases are done (judge/serve.py: starts a spare)
        # calls without the pad on each side, one at a time: the audit's judge clock needs clock_calls of them
        # (its second method beside the timed batches, audit.py)
        self.unpadded = clock_calls
        # the reference's median call (ms) when the problem was prepared: what too_slow compares with
        self.eager_ms = eager_ms
        self.slow_recent: list[bool] = []  # the last three calls past too_slow's limit or not
        self.state, self.runner, self.eager, self.config = state, runner, eager, config
        self.device, self.flush = device, flush
        self.facts = Facts()
        self.truths = DeviceTruths(state, device)
        folder = None if device.type == "cuda" else runner.scratch
        inputs = state.pristine()  # made again when used where the problem's draws are not kept (residency.py)
        # the profiled call on a draw no call saw, a timing draw or the last of 2+ never-seen ones (a kernel run only for
        # inputs it knew passed, red team 5 a05); the ablation on a seen one (a memo beside it: cache_keyed_on_content)
        self.evidence = (state.keys("timing") if len(state.keys("timing")) >= 10 else state.keys("fresh")[1:])[-1:]
        self.batch_n = self._batch_n(eager)
        # never-seen draws and timing draws get no slot of their own: copied in just before their call, so
        # nothing of the candidate's can read them ahead (Slots)
        self.slots = Slots(inputs, state.residency == "device", folder, device,
                           hidden=state.keys("fresh") + state.keys("timing"),
                           min_slots=self.batch_n if state.keys("timing") else 1)
        # a timed batch's k-th call stages its outputs into set k (clock.py); set 0 serves single calls
        self.staging_sets = staging_sets(state, self.batch_n, folder, device)
        self.staging = self.staging_sets[0]
        # a timed batch's call k+1 gets its values once call k's outputs are the judge's (gated.py)
        self.gate = Gate(runner.scratch, self.staging_sets, self.slots, device) \
            if gated_on(config.is_cuda) and self.batch_n > 1 else None
        self.deadline, self.n, self.last_key, self.pad = 0.0, 0, None, Pad()  # last_key: the last single call's draw
        self.eta = Eta(plan_of(self))  # the live line's bound on the time left (eta.py)

    def _batch_n(self, eager: Any) -> int:
        """Calls per timed batch (clock.batch_size), within the slots the reference's runner has."""
        st = self.state
        timing = [k for k in st.keys("timing") if k not in self.evidence]  # what the timed batches use up
        n = batch_size(self.eager_ms, st.call_bytes(), self.device.type, max(1, len(timing) // 5) if timing else 0)
        if eager is not None:  # its slots and staging sets are made for as many
            n = min(n, eager.room)
        return max(1, n) if st.residency == "device" else 1

    # ------------------------------------------------------------------ one call

    def _answer(self, msg: dict[str, Any] | Gone, nonce: int | None = None, part: str = "call") -> StepResult:
        if isinstance(msg, Gone):
            raise Verdict("gone", "", gone=msg)
        try:
            res = StepResult.model_validate(msg)
        except ValueError as e:
            raise Verdict("crashed", f"bad_report: the runner's answer is malformed ({str(e).splitlines()[0][:120]})")
        if not res.ok:
            raise Verdict(res.status, res.reason, res.log)
        if nonce is not None and res.nonce != nonce:
            raise Verdict("crashed", "bad_report: an answer that does not echo its command's nonce "
                                     "(not written by the runner's harness)")
        if res.part != part:
            raise Verdict("crashed", f"bad_report: a {res.part} answer where the call's {part} answer was due")
        return res

    def _vetted(self, nonce: int) -> None:  # the runner's second answer to a call: its vetting held, or its verdict
        self._answer(self.runner.receive(self.deadline), nonce, "vet")

    def call(self, key: str, phase: str, slot: int | None = None, op: str = "call", pad_ms: float | None = None) -> Call:
        """One candidate call on `key`'s values, checked; raises Verdict when it decides the outcome."""
        self.n, self.last_key = self.n + 1, key
        ts = time.perf_counter()
        i = self.slots.slot_for(key) if slot is None else slot
        tf = time.perf_counter()
        self._acc("slots", tf - ts)
        self.flush()
        self._acc("flush", time.perf_counter() - tf)
        nonce = secrets.randbits(62) + 1
        pad = self.pad() if pad_ms is None else pad_ms
        cpu0 = self.runner.precise_cpu_seconds() if phase in _CPU_PHASES else None
        t_send = time.perf_counter()
        msg = self.runner.request({"op": op, "slot": i, "nonce": nonce, "pad_ms": pad}, self.deadline)
        # The judge's clock stops at the runner's account, sent once the outputs are staged (a single call
        # outside the timed batches: its time decides only too_slow and the clock phase's audit reading)
        judge_ms = (time.perf_counter() - t_send) * 1e3
        self.runner.freeze(True)  # from its account until its outputs are compared (as batch: red team 3)
        cpu_a = self.runner.precise_cpu_seconds() if cpu0 is not None else None
        res = self._answer(msg, nonce)
        self._acc("calls", judge_ms / 1e3)
        self._acc("calls_device", res.ms / 1e3)
        if self.config.is_cuda:  # no pad is queued on the CPU
            self._acc("calls_pad", pad / 1e3)
        if pad_ms is None:  # a call without the pad (the clock phase) is uncovered on purpose
            self.pad.saw(res.host_ms, res.covered)
        t0 = time.perf_counter()
        draw = self.state.draws[key]
        truth = self.truths.get(key)
        t1 = time.perf_counter()
        staged = [s.tensor for s in self.staging] if res.staged else None
        note = "" if res.staged else (f"{len(res.outputs)} outputs {[f'{o.dtype}{list(o.shape)}' for o in res.outputs]}, "
                                      f"expected {[f'{o.dtype}{list(o.shape)}' for o in self.state.specs]}")
        c = self.facts.ledger.add(check_call(self.n, key, phase, staged, truth, draw.eager_err,
                                             self.config.tolerance_factor, res.ms, res.wall_ms, note,
                                             judge_ms=judge_ms, host_ms=res.host_ms))
        self.runner.freeze(False)  # compared first, frozen: what it writes into its staging from now on is not seen
        try:
            self._vetted(nonce)
        except Verdict as v:  # an output that is its input changed in place: the input's change is the verdict
            moved = self.slots.changed(i) if v.reason.startswith("aliases_input") else None
            raise v if moved is None else Verdict("rejected", f"mutated_inputs: forward modified input {moved} in place")
        self.runner.freeze(True)
        cpu_v = self.runner.precise_cpu_seconds() if cpu_a is not None else None
        if cpu0 is not None and cpu_a is not None and cpu_v is not None:
            self.facts.cpu_calls.append((cpu0, cpu_a, cpu_v, judge_ms))
        if phase in _CPU_PHASES:  # the runner's whole part of the call: window, vetting, next call's preparation
            self.facts.active_ms.append((time.perf_counter() - t_send) * 1e3)
        t2 = time.perf_counter()
        moved = self.slots.changed(i)
        t3 = time.perf_counter()
        # compare = the truth at hand + outputs checked + inputs found intact
        for name, dt in (("compare", t3 - t0), ("compare_truth", t1 - t0), ("compare_outputs", t2 - t1), ("compare_inputs", t3 - t2)):
            self._acc(name, dt)
        if moved is not None:
            raise Verdict("rejected", f"mutated_inputs: forward modified input {moved} in place")
        if op == "profile":
            self.facts.profile = res
        self._too_slow(judge_ms)
        self.eta.step()
        return c

    def batch(self, keys: list[str], phase: str, null: int = 0) -> Window:
        """One command of `len(keys)` calls on these draws (none: an empty batch), timed by the judge's
        own clock from its command to the runner's account (clock.py), every call's outputs checked."""
        # Draws copied in and caches flushed while the runner is frozen, the clock starting at its thaw (a 1 GiB
        # copy in the window read as `input_cache`, H100); one that cannot be frozen: inside, where its threads are
        nonce = secrets.randbits(62) + 1
        # CPU read still frozen (a sliver after the thaw counted as between calls: 0.024 s/17 calls), then thawed
        cpu0 = self.runner.precise_cpu_seconds() if not self.config.is_cuda or phase in _CPU_PHASES else None
        calls = len(keys) or null  # null: calls of the harness alone, no model (clock.harness_ms)
        gate = self.gate if self.gate is not None and (self.gate.gates(keys) or (not keys and null > 1)) else None
        fill = 1 if gate is not None else None  # gated: the others copied in between the calls (gated.py)
        if gate is not None:
            gate.prepare(keys)
        picks = self._stage(keys, fill) if self.runner.freezes else None
        t_send = time.perf_counter()
        self.runner.freeze(False)
        picks = self._stage(keys, fill) if picks is None else picks
        cmd = {"op": "batch", "slots": picks, "stage": list(range(calls)), "nonce": nonce, "fence": FENCE,
               "null": 0 if keys else null, "gate": gate is not None}
        msg = self.runner.request(cmd, self.deadline) if gate is None else \
            gated_request(self.runner, gate, cmd, self.deadline, calls, gate.between(keys, picks))
        window = (time.perf_counter() - t_send) * 1e3
        self.runner.freeze(True)  # from its account until every staged set is compared, its CPU read frozen (red team 3)
        cpu_a = self.runner.precise_cpu_seconds() if cpu0 is not None else None
        res = self._answer(msg, nonce)
        if res.calls != calls:
            raise Verdict("crashed", f"bad_report: an account of {res.calls} calls for a batch of {calls}")
        cpu_ms = None if self.config.is_cuda or cpu0 is None or cpu_a is None else (cpu_a - cpu0) * 1e3
        kept = Window(window, calls, res.host_ms, cpu_ms)
        # kept before its outputs are compared: a session stopped by this batch keeps its time (verdict.py)
        {"timed": self.facts.batches, "fresh": self.facts.fresh, "control": self.facts.control,
         "empty": self.facts.empty, "null": self.facts.null}.get(phase, []).append(kept)
        self._acc("calls", window / 1e3)
        each = window / max(len(keys), 1)
        t0 = time.perf_counter()
        for k, (key, i) in enumerate(zip(keys, picks, strict=True)):
            self.n += 1
            staged = None if not res.staged else gate.staged(k, calls) if gate is not None else \
                [s.tensor for s in self.staging_sets[k]]
            note = "" if res.staged else (f"{len(res.outputs)} outputs {[f'{o.dtype}{list(o.shape)}' for o in res.outputs]}, "
                                          f"expected {[f'{o.dtype}{list(o.shape)}' for o in self.state.specs]}")
            self.facts.ledger.add(check_call(self.n, key, phase, staged, self.truths.get(key),
                                             self.state.draws[key].eager_err, self.config.tolerance_factor,
                                             each, each, note, judge_ms=each, host_ms=res.host_ms / len(keys)))
        self.runner.send({"op": "vet"})  # thawed for its vetting, which waits for this (runner/serve.py)
        self._vetted(nonce)
        self.runner.freeze(True)  # until its next command: nothing of it runs while the judge works
        cpu_v = self.runner.precise_cpu_seconds() if cpu_a is not None else None
        if cpu0 is not None and cpu_a is not None and cpu_v is not None and phase in _CPU_PHASES:
            self.facts.cpu_calls.append((cpu0, cpu_a, cpu_v, window))
        if phase in _CPU_PHASES:
            self.facts.active_ms.append((time.perf_counter() - t_send) * 1e3)
        for i in picks:
            moved = self.slots.changed(i)
            if moved is not None:
                raise Verdict("rejected", f"mutated_inputs: forward modified input {moved} in place")
        self._acc("compare", time.perf_counter() - t0)
        if self.facts.ledger.misses:
            raise Verdict("incorrect", self._classify())
        if keys:
            self._too_slow(each)
        return kept

    def _stage(self, keys: list[str], fill: int | None = None) -> list[int]:
        picks = self.slots.slots_for(keys, fill)
        self.flush()
        return picks

    def _too_slow(self, judge_ms: float) -> None:
        """Stop a candidate whose calls take `max_slowdown` times the reference's, two of its last three, by
        the judge's clock (what the runner claims plays no part).

        Not the first call (a Triton or NVRTC kernel compiles at its first launch). An incorrect answer
        already seen wins over this. A correct kernel 3,000x slower than eager (9 s a call) cost 224 s of
        calls before this rule (H100, KernelBench L2 14, 2026-11-24); it now costs three. Two in a row, as it
        was, let a candidate slow every other call through the whole time limit (red team 9)."""
        limit_ms = slow_limit_ms(self.config.max_slowdown, self.eager_ms)
        if limit_ms is None or self.eager_ms is None or self.n <= 1:
            return
        self.slow_recent = (self.slow_recent + [judge_ms > limit_ms])[-3:]
        if judge_ms <= limit_ms or sum(self.slow_recent) < 2:
            return
        if self.facts.ledger.misses:
            raise Verdict("incorrect", self._classify())
        raise Verdict("timeout", too_slow_reason(judge_ms, self.eager_ms, self.config.max_slowdown))

    def _eager(self, key: str, **kw: Any) -> StepResult:
        try:
            return self.eager.call(key, self.deadline, **kw)
        except ForgedAnswer as e:  # written while this candidate ran: its doing
            raise Verdict(e.status, e.reason) from None

    # ------------------------------------------------------------------ phases

    def _acc(self, name: str, seconds: float) -> None:
        """Add to a sub-phase total (seconds; inside the phases the schedule names)."""
        self.facts.phase_s[name] = self.facts.phase_s.get(name, 0.0) + seconds

    def run(self, cand: Candidate, job: dict[str, Any]) -> Facts:
        """The whole schedule; a Verdict ends it early (kept in facts.stop)."""
        f = self.facts
        try:
            self.deadline = time.monotonic() + self.config.timeout_s
            self._timed_phase("compile", lambda: self._load(job))
            self._timed_phase("correctness", self._correctness)
            if f.ledger.misses:
                raise Verdict("incorrect", self._classify())
            if not self.config.is_cuda:
                # CPU calls are timed by the host's clocks, and on a machine whose spare runners start on
                # the lane's own cores a starting runner (torch's imports) shares them with the timed calls:
                # both runners' times and the judge's windows moved by 2-4 ms on 0.6 ms calls (2 cores,
                # 2026-11-26). Waiting costs little: the next candidate waits for that runner anyway.
                self._timed_phase("quiet", self.quiet)
            self._timed_phase("timing", self._timing)
            if self.unpadded and self.eager is not None:
                self._timed_phase("clock", self._clock)
            self.timed()
            if self.config.profile:
                self._timed_phase("profile", lambda: self.call((self.evidence or self.state.pool)[0], "profile", op="profile"))
            if f.ledger.misses:
                raise Verdict("incorrect", self._classify())
            if not self.config.allow_torch_only:
                self._timed_phase("ablation", self._ablation)
            self._timed_phase("finish", self._finish)
        except Verdict as v:
            f.stop = v
        return f

    def _timed_phase(self, name: str, fn: Any) -> None:
        self.facts.phase = name
        self.eta.phase(name)
        t0, c0 = time.monotonic(), time.process_time()
        try:
            fn()
        finally:
            self.facts.phase_s[name] = self.facts.phase_s.get(name, 0.0) + time.monotonic() - t0
            self.facts.cpu_s[f"judge.{name}"] = time.process_time() - c0

    def _load(self, job: dict[str, Any]) -> None:
        msg = self.runner.request(job, self.deadline)
        if isinstance(msg, dict) and msg.get("op") == "ready":
            self.facts.load_s = float(msg.get("load_s") or 0.0)
            self.slots.hide()  # mapped by the runner (transport.SharedBuffer.hide)
            for s in self.staging:
                s.hide()
            if self.gate is not None:
                self.gate.hide()
            return
        self._answer(msg)  # a failure report, or the runner gone
        raise Verdict("crashed", "bad_report: the runner answered its job with something else")

    def _correctness(self) -> None:
        st = self.state
        pool = st.pool
        for i in range(self.config.warmup):
            self.call(pool[i % len(pool)], "warmup")
        self.pad.settle()
        for key in st.keys("plain") + st.keys("shifted"):
            self.call(key, "check")
        plain = st.keys("plain")
        if len(plain) >= 2:  # the same buffers again, then refilled with other values in place
            i = self.slots.slot_for(plain[0])
            self.call(plain[0], "again", slot=i)
            if self.slots.refill(i, plain[1]):
                self.call(plain[1], "inplace", slot=i)
            self.slots.refill(i, plain[0])

    def _empties(self) -> None:
        """An empty batch on each side: the round trip a batch's calls are timed beyond (clock.py); on the GPU
        with clock.NET a batch of null calls on each side too (what the harness costs a call: clock.harness_ms)."""
        self.batch([], "empty")
        if self.eager is not None:
            self.facts.ref_empty.append(self._eager_batch([]))
        if NET and self.config.is_cuda and self.eager is not None:
            self.batch([], "null", null=self.batch_n)
            self.facts.ref_null.append(self._eager_batch([], null=self.batch_n))

    def _eager_batch(self, keys: list[str], null: int = 0) -> Window:
        try:
            w = self.eager.batch(keys, self.deadline, self.flush, null=null)
        except ForgedAnswer as e:  # written while this candidate ran: its doing
            raise Verdict(e.status, e.reason) from None
        if keys and self.eager.last_cpu is not None:
            self.facts.ref_cpu.append(self.eager.last_cpu)
        return w

    def _timed_pair(self, keys: list[str]) -> None:
        """A timed batch of the candidate's, then the reference's on the same draws (its own slots)."""
        self.batch(keys, "timed")
        if self.eager is not None:
            t0 = time.perf_counter()
            self.facts.ref_batches.append(self._eager_batch(keys))
            self._acc("ref_calls", time.perf_counter() - t0)

    def times(self) -> tuple[list[float], list[float]]:
        """Per timed batch, a call's time by the judge's clock: the candidate's and the reference's (ms)."""
        f = self.facts
        return both_sides(f.batches, f.empty, f.ref_batches, f.ref_empty, f.null, f.ref_null)

    def _fresh(self, key: str, seen: str) -> None:
        """A never-seen draw as a batch of one, right after a batch of one on a draw the runner has seen
        (its control: the input_cache rule compares the two, timed alike)."""
        self.batch([seen], "control")
        self.batch([key], "fresh")
        if self.eager is not None:  # the reference alone on it too: what a call gains in a batch, both sides
            self.facts.ref_fresh.append(self._eager_batch([key]))

    def _timing(self) -> None:
        """Timed batches of `batch_n` calls, the reference's after each on the same draws, until both sides'
        times are steady or the never-seen draws run out; never-seen calls (batches of one) among them."""
        st, cfg, n = self.state, self.config, self.batch_n
        pool, (fresh, once) = st.pool, ([k for k in st.keys(s) if k not in self.evidence] for s in ("fresh", "timing"))
        self.facts.batch_draws = "timing" if once else "pool"
        if self.eager is not None:  # its first batch on this session's schedule, not kept
            self._eager_batch(pool[:1])
        self._empties()
        t0, remade = time.monotonic(), st.remade_s
        cpu0, active0 = self.runner.cpu_seconds(), len(self.facts.active_ms)
        i = 0
        while True:
            keys = once[i * n:(i + 1) * n] if once else [pool[(i * n + k) % len(pool)] for k in range(n)]
            self._timed_pair(keys)
            self.deadline, remade, i = self.deadline + st.remade_s - remade, st.remade_s, i + 1  # judge's work
            self.eta.step()
            if i % EMPTY_EVERY == 0:
                self._empties()
            if fresh and i % FRESH_EVERY == 0:
                self._fresh(fresh.pop(0), pool[i % len(pool)])
            cand, ref = self.times()
            why = stop_reason(cand, ref if self.eager else [], cfg.trials, time.monotonic() - t0, cfg.max_timing_s,
                              cfg.race_ms) or ("never-seen draws used up" if once and (i + 1) * n > len(once) else None)
            if why:
                self.facts.timing_stop = f"timing stopped after {len(cand)} batches of {n}: {why}"
                break
        for k, key in enumerate(fresh):
            self._fresh(key, pool[k % len(pool)])
        # Where the CPU time cannot be read call by call (no cgroup): over the phase, against the wall
        # time of the runner's whole part of each call (window, vetting, preparation of the next)
        busy = sum(self.facts.active_ms[active0:]) / 1e3
        used = self.facts.cpu_s["runner.timing"] = self.runner.cpu_seconds() - cpu0
        self.facts.cpu_window = (used, busy)
        self.facts.cpu_s["runner.timing_calls_wall"] = busy

    def _ablation(self) -> None:
        """One call, the custom kernels' results replaced by random values: the output must change (on a draw
        not the last call's: a kernel rewriting a kept output buffer's bytes is unseen, red team 5 h01)."""
        pool = self.state.pool
        key = next((k for k in pool if k != self.last_key), pool[0])
        i = self.slots.slot_for(key)
        self.flush()
        nonce = secrets.randbits(62) + 1
        res = self._answer(self.runner.request({"op": "ablate", "slot": i, "nonce": nonce}, self.deadline), nonce)
        self._vetted(nonce)
        if self.slots.changed(i) is not None:
            self.slots.refill(i, key)  # random values may have reached an input: not the candidate's doing
        if res.ablated and res.staged:
            draw = self.state.draws[key]
            c = check_call(0, key, "ablation", [s.tensor for s in self.staging], self.truths.get(key), draw.eager_err,
                           self.config.tolerance_factor, 0.0, 0.0)
            self.facts.ablation_still_right = c.miss is None
        self.facts.ablated = res.ablated

    def _clock(self) -> None:
        """Single calls without the GPU pad, candidate and reference alternating, each timed by the judge's own
        clock from its command to the runner's account: the audit's reading (audit.judge_clock), built
        otherwise than the timed batches (one call a command, the reference's trusted account taking off
        what the judge's clock adds to a call)."""
        pool = self.state.pool
        for i in range(self.unpadded):
            key = pool[i % len(pool)]
            c = self.call(key, "clock", pad_ms=0.0)  # caches flushed before the command, by both
            if c.miss is not None:
                raise Verdict("incorrect", self._classify())
            self.flush()
            r = self._eager(key, pad_ms=0.0)
            self.facts.clock.append((c.judge_ms, c.ms, self.eager.last_window_ms, r.ms))

    def _finish(self) -> None:
        msg = self.runner.request({"op": "finish"}, self.deadline)
        if isinstance(msg, Gone):
            raise Verdict("gone", "", gone=msg)
        if msg.get("ok") is False:
            self._answer(msg)
        try:
            self.facts.final = RunnerFinal.model_validate(msg)
        except ValueError:
            raise Verdict("crashed", "bad_report: the runner's final report is malformed") from None

    def _classify(self) -> str:
        return classify(self.facts.ledger, self.state.truth_prints(self.device),
                        set(self.state.keys("plain")) | set(self.state.keys("fresh")))

    def close(self) -> None:
        self.runner.freeze(False)
        self.runner.close()
        self.slots.free()
        for s in self.staging:
            s.free()
        if self.gate is not None:
            self.gate.free()


__all__ = ["Session"]
