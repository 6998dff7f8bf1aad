"""One candidate's evaluation, driven by the judge: every call the runner makes is checked.

The judge decides each call (which draw, which slot), flushes the caches itself, compares the
staged outputs with the truth on the device, checks that the inputs came back untouched, and
keeps every time in its own memory. The eager reference runs in its own runner on the same
schedule, its calls interleaved with the candidate's, so both are timed under the same conditions
at the same moments. The runner never learns which phase a call belongs to: all calls look alike.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from collections.abc import Callable
from typing import Any

import torch

from kevolve.records import Candidate
from kevolve.sandbox import harness as h
from kevolve.sandbox.checks import Call, Ledger, check_call, classify
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.oracle import ProblemState
from kevolve.sandbox.protocol import RunnerFinal, StepResult
from kevolve.sandbox.runner_proc import Gone, RunnerProcess
from kevolve.sandbox.schedule import FRESH_EVERY, enough
from kevolve.sandbox.slots import Slots
from kevolve.sandbox.transport import SharedBuffer

_GPU_FLUSH_BYTES = 256 * 2**20  # > 2x the L2 of any current GPU (H100: 50 MB)


def cpu_flush_bytes() -> int:
    """Twice the last-level cache (at least 64 MB): rewriting that evicts what a call left there."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = f.read_text().strip().upper()
            sizes.append(int(text[:-1]) * (1024 if text.endswith("K") else 2**20) if text[-1] in "KM" else int(text))
        except (OSError, ValueError):
            continue
    return max(64 * 2**20, 2 * max(sizes, default=0))



def _copy_in(truth: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """A host-resident truth copied to the device (one place, so a test can make it run out of room)."""
    return [t.to(device) for t in truth]

class Pad:
    """The GPU sleep queued before a call, sized by the judge: twice the longest host time of the
    last 16 calls (+0.05 ms), within bounds, doubled for each call the runner reports as not
    covered (the GPU reached the start event before the host had queued the call). One slow host
    call (a GC pause) then does not leave the next call's launch uncovered; a pad longer than
    needed costs wall time, never accuracy."""

    def __init__(self) -> None:
        self.recent: list[float] = []
        self.boost = 1.0

    def __call__(self) -> float:
        return min(max(2 * max(self.recent, default=0.0) + 0.05, 0.05) * self.boost, 20.0)

    def saw(self, host_ms: float, covered: bool = True) -> None:
        self.recent = (self.recent + [host_ms])[-16:]
        if not covered:
            self.boost = min(self.boost * 2, 64.0)

    def settle(self) -> None:
        """Forget the warm-up calls but the last: a first call's host time holds lazy start-up (CuPy's
        NVRTC, Triton's JIT, a first allocation: 50-100 ms), and sized from it the next 16 pads ran at
        the 20 ms cap, twice per call (the runner also times an empty window behind the same pad): 0.4 s
        of every evaluation of a 0.2 ms kernel on the H100 (2026-11-24). A host side that stays long
        shows again in the next calls, and an uncovered call still doubles the pad."""
        self.recent, self.boost = self.recent[-1:], 1.0


class Flusher:
    """The judge's own cache flush before every call: no runner can shrink or skip it."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        nbytes = _GPU_FLUSH_BYTES if device.type == "cuda" else cpu_flush_bytes()
        self.buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)
        self.n = 0

    def __call__(self) -> None:
        self.n = (self.n + 1) & 0x3FFFFFFF
        self.buf.fill_(self.n)
        if self.device.type == "cuda":
            torch.cuda.synchronize()


# A call shorter than this is never too slow, whatever the reference's time (SandboxConfig.max_slowdown):
# a fast reference's hundredfold costs nothing worth stopping for, and a contended machine's hiccup of a
# few hundred milliseconds must not end an honest evaluation.
SLOW_FLOOR_S = 0.5
# CPU: pairs of calls timed again, on a quiet machine, before a mismatch between the runner's claims and
# the judge's clock decides anything (a spare runner starting on the same two cores put 2-4 ms into
# single windows, against 0.6 ms calls: 2026-11-26)
RECLOCK_PAIRS = 20
RECLOCK_PAUSE_S = 0.5
_CPU_PHASES = ("timed", "fresh")  # calls whose runner CPU time is read call by call (verdict.cpu_rule)


class ForgedAnswer(h.StageError):
    """An answer in a reference runner's channel that the runner did not write (judge.ReferenceRunner)."""


class Verdict(Exception):
    """The session ends now with this outcome (raised inside the session only)."""

    def __init__(self, status: str, reason: str, log: str = "", gone: Gone | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.log, self.gone = status, reason, log, gone


@dataclass
class Facts:
    """What a session established; `verdict.py` turns it into an Evaluation."""

    ledger: Ledger = field(default_factory=Ledger)
    ref_ms: list[float] = field(default_factory=list)
    ref_walls: list[float] = field(default_factory=list)
    phase_s: dict[str, float] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)
    load_s: float | None = None
    profile: StepResult | None = None
    final: RunnerFinal | None = None
    stop: Verdict | None = None
    phase: str = "start-up"
    ablated: int = 0  # extension calls an ablation call replaced (0: nothing to ablate)
    ablation_still_right: bool = False
    clock: list[tuple[float, float, float, float]] = field(default_factory=list)  # judge ms / claimed ms, cand and ref
    clock_stage_ms: float = 0.0  # what staging a call's outputs adds to the candidate's side of that clock
    # each timed call and the reference's call after it, as clock: the judge's window and the claimed ms
    pairs: list[tuple[float, float, float, float]] = field(default_factory=list)
    # timed and never-seen calls: the candidate runner's CPU seconds (cgroup) before the command, at its
    # account and at its vetting's answer, and the call's window (ms); the reference's CPU in its calls'
    # windows and vettings (verdict.cpu_rule)
    cpu_calls: list[tuple[float, float, float, float]] = field(default_factory=list)
    ref_cpu: list[tuple[float, float]] = field(default_factory=list)
    active_ms: list[float] = field(default_factory=list)  # timed and never-seen calls: command to vetting's answer
    retimed: bool = False  # the first timing pass looked like side-stream work and was done again (verdict.py)
    # over the timing phase: CPU seconds of the runner's processes, and seconds it spent inside calls
    cpu_window: tuple[float, float] | None = None


class Session:
    """Drives one candidate runner (and the problem's eager runner) through the schedule."""

    def __init__(self, state: ProblemState, runner: RunnerProcess, eager: Any, config: SandboxConfig,
                 device: torch.device, flush: Flusher, clock_calls: int = 0, ref_ms: float | None = None,
                 quiet: Callable[[], None] | None = None) -> None:
        self.clock_calls = clock_calls
        self.quiet = quiet or (lambda: None)  # waits until no runner is starting beside this session (judge.py)
        # calls without the pad on each side: the audit's judge clock needs clock_calls of them; every CUDA
        # evaluation takes config.launch_calls for its launch-inclusive time (the same calls serve both)
        self.unpadded = max(clock_calls, config.launch_calls if config.is_cuda else 0)
        # the reference's median call (ms) when the problem was prepared: what too_slow compares with
        self.ref_ms = ref_ms
        self.slow_calls = 0
        self.state, self.runner, self.eager, self.config = state, runner, eager, config
        self.device, self.flush = device, flush
        self.facts = Facts()
        folder = None if device.type == "cuda" else runner.scratch
        inputs = {k: d.inputs for k, d in state.draws.items()}
        # never-seen draws and timing draws get no slot of their own: copied in just before their call, so
        # nothing of the candidate's can read them ahead (Slots)
        self.slots = Slots(inputs, state.residency == "device", folder, device,
                           hidden=state.keys("fresh") + state.keys("timing"))
        self.staging = [SharedBuffer(torch.empty(s.shape, dtype=getattr(torch, s.dtype.removeprefix("torch.")),
                                                 device="meta"), folder, device) for s in state.specs]
        self.deadline = 0.0
        self.n = 0
        self.pad, self.eager_pad = Pad(), Pad()
        self.eager_skips = 0

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

    def _vetted(self, nonce: int) -> None:
        """The runner's second answer to a call: its vetting (threads, outputs changed after return,
        guards, settings) held, or the verdict it reached."""
        self._answer(self.runner.receive(self.deadline), nonce, "vet")

    def call(self, key: str, phase: str, slot: int | None = None, op: str = "call", pad_ms: float | None = None) -> Call:
        """One candidate call on `key`'s values, checked; raises Verdict when it decides the outcome."""
        self.n += 1
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
        # The judge's clock stops at the runner's account, sent once the outputs are staged: what is
        # inside is the call, its staging and two pipe hops (step.Stepper.prepare: the harness's other
        # work comes before the command or after the account), compared with the claims (timer_mismatch)
        judge_ms = (time.perf_counter() - t_send) * 1e3
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
        truth = self._truth(key)
        t1 = time.perf_counter()
        staged = [s.tensor for s in self.staging] if res.staged else None
        note = "" if res.staged else (f"{len(res.outputs)} outputs {[f'{o.dtype}{list(o.shape)}' for o in res.outputs]}, "
                                      f"expected {[f'{o.dtype}{list(o.shape)}' for o in self.state.specs]}")
        c = self.facts.ledger.add(check_call(self.n, key, phase, staged, truth, draw.eager_err,
                                             self.config.tolerance_factor, res.ms, res.wall_ms, note,
                                             judge_ms=judge_ms, host_ms=res.host_ms))
        self._vetted(nonce)  # compared first: what the runner writes into its staging from now on is not seen
        cpu_v = self.runner.precise_cpu_seconds() if cpu_a is not None else None
        if cpu0 is not None and cpu_a is not None and cpu_v is not None:
            self.facts.cpu_calls.append((cpu0, cpu_a, cpu_v, judge_ms))
        if phase in _CPU_PHASES:  # the runner's whole part of the call: window, vetting, next call's preparation
            self.facts.active_ms.append((time.perf_counter() - t_send) * 1e3)
        t2 = time.perf_counter()
        moved = self.slots.changed(i)
        t3 = time.perf_counter()
        # compare = the truth at hand + outputs checked + inputs found intact
        for name, dt in (("compare", t3 - t0), ("compare_truth", t1 - t0), ("compare_outputs", t2 - t1),
                         ("compare_inputs", t3 - t2)):
            self._acc(name, dt)
        if moved is not None:
            raise Verdict("rejected", f"mutated_inputs: forward modified input {moved} in place")
        if op == "profile":
            self.facts.profile = res
        self._too_slow(judge_ms, max(res.ms, res.host_ms))
        return c

    def _too_slow(self, judge_ms: float, claimed_ms: float) -> None:
        """Stop a candidate whose calls take `max_slowdown` times the reference's, two in a row.

        Not the first call (a Triton or NVRTC kernel compiles at its first launch). Slow by both clocks:
        the judge's (request to answer, which cannot be made shorter) and the runner's own event or
        host time (which keeps the GPU pad out of it). A candidate that claims less only avoids being
        stopped early; every other check still runs. An incorrect answer already seen wins over this.
        A correct kernel 3,000x slower than eager (9 s a call) cost 224 s of calls before this rule
        (H100, KernelBench L2 14, 2026-11-24); it now costs three."""
        factor = self.config.max_slowdown
        if not factor or self.ref_ms is None or self.n <= 1:
            return
        limit_ms = max(SLOW_FLOOR_S * 1e3, factor * self.ref_ms)
        if min(judge_ms, claimed_ms) <= limit_ms:
            self.slow_calls = 0
            return
        self.slow_calls += 1
        if self.slow_calls < 2:
            return
        if self.facts.ledger.misses:
            raise Verdict("incorrect", self._classify())
        raise Verdict("timeout", f"too_slow: calls take {claimed_ms / 1e3:.2f} s, {claimed_ms / self.ref_ms:,.0f}x "
                                 f"the reference's {self.ref_ms:.3f} ms (stopped past {factor:g}x and "
                                 f"{SLOW_FLOOR_S:g} s a call, two calls in a row: --max-slowdown)")

    def _truth(self, key: str) -> list[torch.Tensor]:
        """The truth of a draw on the device: kept there, or (host residency) the last two used."""
        truth = self.state.draws[key].truth
        if all(t.device.type == self.device.type for t in truth):
            return truth
        # At most two truths on the device at once (a 6.4 GB problem's judge is near the H100's limit:
        # a third one ran it out of memory). A draw outside the timing pool is used once or twice: it
        # takes one pool draw's place and is not kept, so only that one is copied in again (kept, it
        # pushed both pool draws out in turn, two copies more per fresh call).
        cache = self.__dict__.setdefault("_truth_cache", {})
        if key not in cache:
            room = self.__dict__.get("_truth_room", 2)
            while len(cache) >= room:
                cache.pop(next(iter(cache)))
            try:
                moved = _copy_in(truth, self.device)
            except torch.OutOfMemoryError:
                # the runners' copies leave no room for a second truth (KernelBench L1 87's 8.6 GB output, its
                # third problem-sized copy on the H100 asked for 8 GiB and failed the judge): keep one from now on
                cache.clear()
                self.__dict__["_truth_room"] = 1
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
                moved = _copy_in(truth, self.device)
            if key not in self.state.pool:
                return moved
            cache[key] = moved
        return cache[key]

    def eager_call(self, key: str) -> StepResult | None:
        """One call of the reference on the same draw, in its own runner, timed alike."""
        if self.eager is None:
            return None
        # a draw without a slot of its own (timing, never-seen) is copied into one first, then the caches
        # are flushed: as for the candidate's call (`call`), the reference reads its inputs cold
        self.eager.slots.slot_for(key)
        tf = time.perf_counter()
        self.flush()
        t0 = time.perf_counter()
        pad = self.eager_pad()
        r = self._eager(key, pad_ms=pad)
        if self.eager.last_cpu is not None:
            self.facts.ref_cpu.append(self.eager.last_cpu)
        self._acc("flush", t0 - tf)
        self._acc("ref_calls", time.perf_counter() - t0)
        self._acc("ref_calls_device", r.ms / 1e3)
        if self.config.is_cuda:
            self._acc("ref_calls_pad", pad / 1e3)
        self.eager_pad.saw(r.host_ms, r.covered)
        # The reference is trusted code: a time with launch gaps in it is not its time (after 8 such
        # calls the pad is 64x its size, and a host side that still outlasts it is the model's own).
        if r.covered or self.eager_skips >= 8:
            self.facts.ref_ms.append(r.ms)
            self.facts.ref_walls.append(r.wall_ms)
        else:
            self.eager_skips += 1
        return r

    def _eager(self, key: str, **kw: Any) -> StepResult:
        try:
            return self.eager.call(key, self.deadline, **kw)
        except ForgedAnswer as e:  # written while this candidate ran: its doing
            raise Verdict(e.status, e.reason) from None

    # ------------------------------------------------------------------ phases

    def _acc(self, name: str, seconds: float) -> None:
        """Add to a sub-phase total (seconds; inside the phases the schedule names)."""
        self.facts.phase_s[name] = self.facts.phase_s.get(name, 0.0) + seconds

    def _phase(self, name: str) -> None:
        self.facts.phase = name

    def run(self, cand: Candidate, job: dict[str, Any]) -> Facts:
        """The whole schedule; a Verdict ends it early (kept in facts.stop)."""
        f = self.facts
        try:
            self.deadline = time.monotonic() + self.config.timeout_s
            # before the candidate's code is loaded anywhere; on the CPU every evaluation checks its claims
            # against the judge's clock (verdict.py: timer_mismatch)
            if (self.clock_calls or not self.config.is_cuda) and self.eager is not None:
                f.clock_stage_ms = self._staging_cost()
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
            if self.config.is_cuda and self._side_suspect():
                self._timed_phase("retime", self._retime)
            if not self.config.is_cuda and self._clock_suspect():
                self._timed_phase("reclock", self._reclock)
                if self._clock_suspect():  # once more, a moment later: the verdict reads the last pairs
                    self._timed_phase("reclock", lambda: self._reclock(RECLOCK_PAUSE_S))
            if self.unpadded and self.eager is not None:
                self._timed_phase("clock", self._clock)
            if self.config.profile:
                self._timed_phase("profile", lambda: self.call(self.state.pool[0], "profile", op="profile"))
            if f.ledger.misses:
                raise Verdict("incorrect", self._classify())
            if not self.config.allow_torch_only:
                self._timed_phase("ablation", self._ablation)
            self._timed_phase("finish", self._finish)
        except Verdict as v:
            f.stop = v
        return f

    def _timed_phase(self, name: str, fn: Any) -> None:
        self._phase(name)
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

    def _side_suspect(self) -> bool:
        from kevolve.sandbox.verdict import side_stream_seen

        return side_stream_seen(self.facts)

    def _clock_suspect(self) -> bool:
        from kevolve.sandbox.verdict import timer_mismatch

        return self.eager is not None and timer_mismatch(self.facts, self.config) is not None

    def _reclock(self, pause_s: float = 0.0) -> None:
        """More timed calls, each with the reference's after it, on a quiet machine, when the runner's
        claims and the judge's clock disagreed over the timing pass: the verdict's rule then reads these
        pairs alone (verdict.timer_mismatch). The calls are timed calls like any (same command, same
        checks): a candidate cannot tell them apart, so a forged timer disagrees here too. A second
        reclock, `pause_s` later, follows a first that still disagrees: another evaluation sharing the
        machine (`optimize --concurrency 2` on two cores, a candidate that busy-waits beside it) stretched
        an honest candidate's windows past the bound for one reclock (CI, 2026-11-26: claimed 0.672 ms,
        judge's clock 1.122 ms); a forged timer disagrees in both."""
        if pause_s:
            time.sleep(pause_s)
        self.quiet()
        self.facts.pairs.clear()
        pool = self.state.pool
        for i in range(RECLOCK_PAIRS):
            self._timed_pair(pool[i % len(pool)])

    def _timed_pair(self, key: str) -> None:
        """One timed call and the reference's on the same draw, both kept by the judge's clock too."""
        c = self.call(key, "timed")
        if c.miss is not None:
            raise Verdict("incorrect", self._classify())
        r = self.eager_call(key)
        if r is not None and self.eager is not None:  # timer_mismatch reads the pair
            self.facts.pairs.append((c.judge_ms, c.ms, self.eager.last_window_ms, r.ms))

    def _retime(self) -> None:
        """The timing pass again, once, when the first one looked like side-stream work (verdict.py's
        rule would fire). A contended GPU machine can delay an honest runner's device-wide sync for a
        whole short pass (H100 soak under bubblewrap: 2 of 130 honest 4 us kernels read 13 us of
        \"side work\" while spare runners started beside them). The verdict and the time then come from
        the second pass alone, its calls checked like the first's: work kept off the timed stream on
        every call shows in both; a candidate that hid work in one pass only is timed on the other.
        Never-seen draws are not timed again (they have been seen: a cache would answer them)."""
        self.facts.retimed = True
        self.facts.ledger.calls = [replace(c, phase="timed-first") if c.phase == "timed" else c
                                   for c in self.facts.ledger.calls]
        self._timing(fresh_too=False)

    def _timing(self, fresh_too: bool = True) -> None:
        st, cfg = self.state, self.config
        pool, fresh = st.pool, (st.keys("fresh") if fresh_too else [])
        # every timed call on values no call has had before, where the problem has timing draws (the CPU,
        # oracle.TIMING_MAX): nothing a candidate kept from an earlier call answers one; it is timed until
        # its times are steady or the draws run out, whichever comes first
        once = st.keys("timing") if fresh_too else []
        if self.eager is not None:
            self.eager_call(pool[0])  # its first call on this session's schedule
            self.facts.ref_ms.clear()
            self.facts.ref_walls.clear()
        t0 = time.monotonic()
        cpu0, active0 = self.runner.cpu_seconds(), len(self.facts.active_ms)
        i = 0
        while True:
            key = once[i] if once else pool[i % len(pool)]
            self._timed_pair(key)
            i += 1
            if fresh and i % FRESH_EVERY == 0:
                c = self.call(fresh.pop(0), "fresh")
                if c.miss is not None:
                    raise Verdict("incorrect", self._classify())
            if enough(self.facts.ledger.times("timed"), self.facts.ref_ms if self.eager else [], cfg.trials,
                      time.monotonic() - t0, cfg.max_timing_s) or once and i >= len(once):
                break
        for key in fresh:
            c = self.call(key, "fresh")
            if c.miss is not None:
                raise Verdict("incorrect", self._classify())
        # Where the CPU time cannot be read call by call (no cgroup): over the phase, against the wall
        # time of the runner's whole part of each call (window, vetting, preparation of the next)
        busy = sum(self.facts.active_ms[active0:]) / 1e3
        used = self.facts.cpu_s["runner.timing"] = self.runner.cpu_seconds() - cpu0
        self.facts.cpu_window = (used, busy)
        self.facts.cpu_s["runner.timing_calls_wall"] = busy

    def _ablation(self) -> None:
        """One call with the custom kernels' results replaced by random values: the output must change."""
        key = self.state.pool[0]
        i = self.slots.slot_for(key)
        self.flush()
        nonce = secrets.randbits(62) + 1
        res = self._answer(self.runner.request({"op": "ablate", "slot": i, "nonce": nonce}, self.deadline), nonce)
        self._vetted(nonce)
        if self.slots.changed(i) is not None:
            self.slots.refill(i, key)  # random values may have reached an input: not the candidate's doing
        if res.ablated and res.staged:
            draw = self.state.draws[key]
            c = check_call(0, key, "ablation", [s.tensor for s in self.staging], draw.truth, draw.eager_err,
                           self.config.tolerance_factor, 0.0, 0.0)
            self.facts.ablation_still_right = c.miss is None
        self.facts.ablated = res.ablated

    def _staging_cost(self, repeats: int = 3) -> float:
        """What staging one call's outputs adds to the candidate's side of the judge's clock (ms).

        In every call the judge's clock times, the candidate's runner copies its outputs into the
        judge's staging buffers and syncs; the reference's runner stages nothing. With a large output
        that copy costs as much as a memory-bound kernel (256 MB: ~0.18 ms of HBM traffic on an H100,
        next to a 0.19 ms fused GELU): uncorrected, the clock reads such an honest kernel as slower than
        its timer claims. The judge times the same bytes copied itself, the fastest of `repeats`, before
        the candidate's code is loaded in any process, so nothing of the candidate's can inflate it.
        """
        cuda = self.device.type == "cuda"
        chunk = 64 << 20
        try:
            bufs = [s.tensor.reshape(-1).view(torch.uint8) for s in self.staging if s.tensor.numel()]
            if not bufs:
                return 0.0
            tmp = torch.empty(min(chunk, max(b.numel() for b in bufs)), dtype=torch.uint8, device=self.device)
            best = float("inf")
            for _ in range(repeats):
                if cuda:
                    torch.cuda.synchronize(self.device)
                t0 = time.perf_counter()
                for b in bufs:
                    for off in range(0, b.numel(), chunk):
                        part = b[off:off + chunk]
                        tmp[:part.numel()].copy_(part)
                if cuda:
                    torch.cuda.synchronize(self.device)
                best = min(best, time.perf_counter() - t0)
            del tmp
        except (RuntimeError, MemoryError):  # no room for the copy: no correction (the stricter reading)
            return 0.0
        return best * 1e3

    def _clock(self) -> None:
        """Calls without the GPU pad, candidate and reference alternating, timed by the judge's own clock
        and by each runner's events (which, with the GPU idle when the call starts, count the host's launch
        work: KernelBench's timer; the launch-inclusive time in verdict.py).

        The same runner code serves both, so what the judge's clock adds to a call (channel, flush,
        checks) is the same on both sides and is read off the reference, whose own times are trusted;
        except the staging of the candidate's outputs, which the reference does not do
        (`_staging_cost`, taken off in audit.judge_clock_speedup).
        """
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
        prints = self.state_prints()
        return classify(self.facts.ledger, prints, set(self.state.keys("plain")) | set(self.state.keys("fresh")))

    def state_prints(self) -> dict[str, tuple[int, ...]]:
        from kevolve.sandbox.checks import fingerprint

        if not hasattr(self.state, "_prints"):
            self.state._prints = {k: fingerprint([t.to(self.device) for t in d.truth])  # type: ignore[attr-defined]
                                  for k, d in self.state.draws.items()}
        return self.state._prints  # type: ignore[attr-defined]

    def close(self) -> None:
        self.runner.close()
        self.slots.free()
        for s in self.staging:
            s.free()


__all__ = ["Facts", "Flusher", "ForgedAnswer", "Session", "Verdict"]
