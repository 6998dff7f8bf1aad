"""Typed records shared by every kevolve package.

Everything that crosses a module or process boundary is one of these frozen models, never a
plain dict, never an exception object, never ``None`` for "failed".
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kevolve.kernel_params import KernelParams, legacy_choice
from kevolve.languages import LANGUAGES


class Record(BaseModel):
    """Base class: frozen, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Outcome(StrEnum):
    """The verdict on one candidate."""

    OK = "ok"
    REJECTED = "rejected"  # ran and matched, but broke an integrity rule
    COMPILE_ERROR = "compile_error"
    INCORRECT = "incorrect"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    INFRA_ERROR = "infra_error"  # the machine broke, not the candidate: retried, never scored


class Origin(StrEnum):
    """How a candidate came to be."""

    TRANSLATE = "translate"
    REPAIR = "repair"
    MUTATE = "mutate"
    CROSSOVER = "crossover"
    OFFLINE = "offline"
    IMPORTED = "imported"
    COMPOSED = "composed"  # a whole model's part candidates put together in one ModelNew (kevolve/parts)


class Answer(StrEnum):
    """What a search (`optimize`) or a suite run (`bench`) has to offer, and its documented exit code."""

    IMPROVED = "improved"  # a correct kernel faster than PyTorch eager: exit 0
    NOT_FASTER = "not_faster"  # correct kernels, none faster than eager: keep your module; exit 4
    NONE_CORRECT = "none_correct"  # no correct kernel at all; exit 5

    @classmethod
    def of(cls, best_speedup: float | None) -> Answer:
        """The answer for the fastest correct kernel's speedup over eager (None: none was correct)."""
        if best_speedup is None:
            return cls.NONE_CORRECT
        return cls.IMPROVED if best_speedup > 1.0 else cls.NOT_FASTER

    @property
    def exit_code(self) -> int:
        """0 improved, 4 nothing faster, 5 nothing correct (1: the environment failed, 2: bad usage, 3: `bench
        baselines` unfinished, 130/143: interrupted)."""
        return {Answer.IMPROVED: 0, Answer.NOT_FASTER: 4, Answer.NONE_CORRECT: 5}[self]

    def line(self, best_speedup: float | None) -> str:
        """One line for the user: what to do with the result."""
        if self is Answer.IMPROVED:
            return f"{best_speedup:.2f}x faster than PyTorch eager"
        if self is Answer.NOT_FASTER:
            return f"nothing beat eager (best {best_speedup:.2f}x): keep your module"
        return "no candidate was correct: keep your module"


def content_hash(text: str) -> str:
    """Stable identifier for source text (first 16 hex digits of SHA-256)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


KernelLanguage = StrEnum("KernelLanguage", {name.upper(): name for name in LANGUAGES})  # type: ignore[misc]
"""How a candidate writes its kernels (what `--language` asks the proposer for): one member per entry of
kevolve/languages.py (CUDA, CUPY, TRITON …)."""


class Problem(Record):
    """A KernelBench-format problem: a file defining Model, get_inputs and get_init_inputs."""

    id: str = Field(description="content hash of the source: renamed files keep their identity")
    name: str = Field(description="file stem, e.g. '19_ReLU'")
    level: int | None = Field(default=None, description="KernelBench level when known")
    source: str = Field(description="the problem file's text")
    path: str = Field(description="where the problem was loaded from")

    @classmethod
    def from_source(cls, source: str, path: str, name: str, level: int | None = None) -> Problem:
        return cls(id=content_hash(source), name=name, level=level, source=source, path=path)


class OfflineChoice(Record):
    """What the offline generator chose for a candidate, carried on its record: the loop's mutate, crossover and
    repair jobs read their offline parents' settings here, never from the source."""

    technique: str = Field(default="cuda", description=(
        "the plan variant that made it: 'cuda' (library calls, CUDA kernels for the rest) or 'triton_mm' "
        "(products with their element-wise epilogue as Triton kernels)"))
    groups: tuple[KernelParams, ...] = Field(description="each fused group's kernel parameters, in the plan's order")


class Candidate(Record):
    """A proposed implementation: Python source defining ModelNew (KernelBench convention)."""

    id: str = Field(description="content hash of the source")
    problem_id: str
    source: str
    parent_ids: tuple[str, ...] = ()
    origin: Origin = Origin.IMPORTED
    proposer: str = Field(default="user", description="model name, 'offline' or 'user'")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    generation: int | None = Field(default=None, ge=0, description="the optimize generation that proposed it (0: "
                                   "the translations); None outside a search (imported, bench)")
    offline: OfflineChoice | None = Field(default=None, description="what the offline generator chose; None "
                                          "from any other proposer")

    @model_validator(mode="before")
    @classmethod
    def _read_old_offline_choice(cls, data: Any) -> Any:
        """A record saved before `offline` existed (run folders, checkpoints of 2026-11-27 and earlier) had the
        offline generator's choice only as a comment in its source: read it there, once, on loading."""
        if isinstance(data, dict) and "offline" not in data and isinstance(data.get("source"), str):
            old = legacy_choice(data["source"], data.get("problem_id"))
            if old is not None:
                data = {**data, "offline": old}
        return data

    @classmethod
    def from_source(cls, source: str, problem_id: str, **kw: object) -> Candidate:
        """A new record for `source` (its id is the source's hash); `offline` only as given, never read from the
        text."""
        kw.setdefault("offline", None)
        return cls(id=content_hash(source), problem_id=problem_id, source=source, **kw)  # type: ignore[arg-type]


class TimingStats(Record):
    """Repeated timings of one callable, all in milliseconds."""

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float = Field(description="interquartile range: the spread reported beside the median")
    trials: int
    method: str = Field(description="how it was timed, e.g. 'cuda_events+device_sync+l2_flush'")
    wall_median_ms: float | None = Field(
        default=None, description="host clock around call + device-wide sync (catches side work)"
    )
    claimed_median_ms: float | None = Field(default=None, description=(
        "the runner's own account of a call (median), a diagnostic: no speed is read from it (sandbox/judge/clock.py)"))
    stopped: str | None = Field(default=None, description=(
        "why the timed calls stopped where they did: 'timing stopped after N batches of M: medians steady', out of "
        "time, plainly slower than the reference or than a search's best (sandbox/judge/schedule.stop_reason)"))
    alone_median_ms: float | None = Field(default=None, description=(
        "a call alone (a batch of one on a never-seen draw) by the judge's clock, median: against median_ms, what a "
        "call gained from the calls beside it in a batch (a diagnostic: a model that does a batch's later calls' "
        "work in its first gains more than the reference does)"))


class CheckResult(Record):
    """One verification step's outcome."""

    name: str
    passed: bool
    detail: str = ""


class KernelLaunch(Record):
    """A kernel (or, on the CPU, an extension function) the candidate ran in one forward call."""

    name: str
    count: int
    device_time_us: float = 0.0
    custom: bool = Field(description="written by the candidate, not launched by PyTorch/cuBLAS/cuDNN")
    stream: int | None = None


class Profile(Record):
    """What one profiled forward call did."""

    kernels: tuple[KernelLaunch, ...] = ()
    torch_ops: tuple[str, ...] = Field(default=(), description="ATen ops the forward called")
    op_counts: tuple[tuple[str, int], ...] = Field(default=(), description=(
        "each of torch_ops with the number of times the profiler saw it (nested calls included)"))
    ncu: dict[str, float] = Field(default_factory=dict, description="NCU metrics where measured")
    achieved_gbps: float | None = Field(default=None, description="min_bytes / median time")
    achieved_tflops: float | None = Field(default=None, description="flops / median time")
    roofline_fraction: float | None = Field(default=None, description="of the nearer measured roof")
    min_bytes: int | None = Field(default=None, description="inputs + parameters read once, outputs written once")
    flops: int | None = Field(default=None, description="matmul/conv/attention FLOPs of the reference")
    total_us: float | None = Field(default=None, description="device time of all kernels (CUDA) or host time "
                                   "of the call (CPU) in the profiled call: what custom kernels' share is of")
    torch_us: float | None = Field(default=None, description="of total_us, the time PyTorch's own compute took "
                                   "(its kernels on CUDA, its top-level ATen compute ops on the CPU)")
    order: tuple[tuple[int, float], ...] = Field(default=(), description=(
        "CUDA: the call's kernels in the order they started, as (index into `kernels`, µs), at most 4096: where a "
        "model's parts begin and end, eager's beside the candidate's (kevolve/where_time.py); a diagnostic"))


class Audit(Record):
    """An accepted candidate measured again: fresh runner, fresh inputs, and the judge's own clock."""

    passed: bool
    reason: str = Field(description="one line; 'audit_mismatch: …' when it overturned the verdict")
    speedup: float | None = Field(default=None, description="the audit's own speedup over eager (same timer)")
    judge_clock_speedup: float | None = Field(
        default=None, description="eager / candidate by the judge's clock, end to end (launch included, no GPU pad)")
    staging_ms: float = Field(default=0.0, description=(
        "taken off each candidate call on the judge's clock: the copy of its outputs into the judge's "
        "staging buffers, which the reference's calls do not make (timed by the judge)"))
    clock_ms: float | None = Field(default=None, description=(
        "the candidate's call end to end by the judge's clock (median of the pairs, ms; what the clock adds "
        "and the staging taken off)"))
    clock_spread_ms: float | None = Field(default=None, description="interquartile range of those pairs (ms)")
    candidate_ms: float | None = Field(default=None, description="the audit's own median candidate call (same timer, ms)")
    eager_ms: float | None = Field(default=None, description="the audit's own median eager call (same timer, ms)")
    evaluation_speedup: float | None = Field(default=None, description=(
        "what the evaluation read where the audit read it slower and its lower speed stands (the verdict's timings "
        "are then the audit's); None where the evaluation's own speed stands"))
    seeds: tuple[int, ...] = ()
    wall_s: float = 0.0
    timer_only: bool = Field(default=False, description=(
        "it overturned on the runner's timer alone (its fresh run ok, the judge's clock content)"))
    first: str | None = Field(default=None, description=(
        "the first audit's one-line reason when it disagreed on the runner's timer alone (its fresh run ok): "
        "a second audit, in another fresh process on another seed, then decided"))


    @property
    def summary(self) -> str:
        """One line, one number, named: the audit's own speedup over eager (issue 37: two speedups side by side read
        as two answers). The judge's end-to-end clock, which can only overturn, is report.md's and the JSON's."""
        if not self.passed:
            return f"overturned: {self.reason}"
        again = "no speedup measured" if self.speedup is None else f"{self.speedup:.2f}x vs eager"
        lower = "" if self.evaluation_speedup is None else f" (the lower stands; the search read {self.evaluation_speedup:.2f}x)"
        return f"kept: measured again in a fresh process on fresh inputs, {again}{lower}"


# The harness's own lines in a runner's output, not the candidate's: libkineto logs every profiler start and stop, and
# each runner warms the profiler up as it starts, so a timeout's or a crash's log ended in two such lines (issue 37:
# `eval --timeout 0.5` showed "… SyncActivityProfilerHandler.cpp:59] profiler_stop" as the last thing the user read).
_HARNESS_LINE = re.compile(r"^USDT:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ \w+\.cpp:\d+\] ")


class Evaluation(Record):
    """The sandbox's verdict on one candidate. Always returned, never raised."""

    candidate_id: str
    problem_id: str
    outcome: Outcome
    reason: str = Field(description="one line; a stable code before the colon, e.g. 'side_stream: …'")
    checks: tuple[CheckResult, ...] = ()
    timing: TimingStats | None = None
    ref_timing: TimingStats | None = None
    compile_ref_timing: TimingStats | None = None
    launch_timing: TimingStats | None = Field(default=None, description=(
        "the candidate's calls with the GPU idle when each starts, so the host's launch work counts "
        "(KernelBench's timer; CUDA only): a few calls after timing, alternating with eager's"))
    ref_launch_timing: TimingStats | None = Field(default=None, description="eager's calls timed the same way, "
                                                  "interleaved with the candidate's")
    compile_note: str = Field(default="", description="why torch.compile has no timing, where it was asked for "
                              "and has none (e.g. 'torch.compile baseline unavailable: …')")
    profile: Profile | None = None
    ref_profile: Profile | None = Field(default=None, description=(
        "eager's profiled call, made when the problem was prepared: where the reference's time goes, beside the "
        "candidate's `profile` (kevolve/where_time.py)"))
    device: str = ""
    versions: dict[str, str] = Field(default_factory=dict)
    compile_s: float | None = Field(default=None, description=(
        "seconds building the candidate: build, import and construction, plus its first call beyond a typical "
        "one (Triton and NVRTC kernels compile at their first launch)"))
    phase_s: dict[str, float] = Field(
        default_factory=dict, description="seconds per phase: reference, compile, correctness, timing, profile"
    )
    cpu_s: dict[str, float] = Field(
        default_factory=dict, description="CPU seconds by process and phase (judge.<phase>, runner), for --timings"
    )
    seeds: tuple[int, ...] = Field(default=(), description="input-draw seeds, for reproducing the verdict")
    wall_s: float = 0.0
    log_tail: str = Field(default="", description="last lines of compiler / worker output")
    audit: Audit | None = Field(default=None, description="the independent re-measurement, where one was asked for")

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def reason_code(self) -> str:
        return self.reason.split(":", 1)[0].strip()

    @property
    def candidate_log(self) -> str:
        """`log_tail` without the harness's own lines (the profiler's): what the user and the repair prompt read."""
        return "\n".join(line for line in self.log_tail.splitlines() if not _HARNESS_LINE.match(line))

    # One name per quantity: every projection (the --json object, archive rows, bench rows, run results)
    # reads these, whatever its own field is called on disk.
    @property
    def runtime_ms(self) -> float | None:
        """The candidate's median time."""
        return None if self.timing is None else self.timing.median_ms

    @property
    def eager_ms(self) -> float | None:
        """PyTorch eager's median time (the reference, `ref_timing`)."""
        return None if self.ref_timing is None else self.ref_timing.median_ms

    @property
    def compile_ms(self) -> float | None:
        """torch.compile's median time (`compile_ref_timing`)."""
        return None if self.compile_ref_timing is None else self.compile_ref_timing.median_ms

    @property
    def speedup(self) -> float | None:
        """Eager time over candidate time; None unless the candidate is ok."""
        if not self.ok or self.runtime_ms is None or self.eager_ms is None:
            return None
        return self.eager_ms / self.runtime_ms

    @property
    def speedup_launch(self) -> float | None:
        """Eager over candidate with the host's launch work counted (`launch_timing`); None unless ok and
        measured (CUDA)."""
        if not self.ok or self.launch_timing is None or self.ref_launch_timing is None:
            return None
        return self.ref_launch_timing.median_ms / max(self.launch_timing.median_ms, 1e-9)

    @property
    def fitness(self) -> float:
        """What the searches rank by: the lower of `speedup` (device time, launch work hidden) and
        `speedup_launch` (launch work counted), where both were measured; 0.0 unless ok. A forward whose
        host side outlasts its kernels is only as fast as a caller waiting for it sees (an offline
        cross-entropy at 1.38x device time was 0.68-0.90x end to end on the H100, 2026-11-25), and a
        CUDA-graph replay that removes launch work is only seen by the second."""
        sp = self.speedup
        if sp is None:
            return 0.0
        sl = self.speedup_launch
        return sp if sl is None else min(sp, sl)

    @property
    def baseline(self) -> str:
        """Where the reference timings came from, e.g. 'eager interleaved, compile cached'.

        'interleaved': timed alternately with the candidate's calls in the same judge session (what
        the speedup is against); 'session': timed alone in the judge session when the problem was
        prepared; 'cached': from bench's baseline cache (reports only, never a speedup's denominator).
        """
        parts = []
        if self.ref_timing is not None:
            m = self.ref_timing.method
            parts.append("eager " + ("cached" if "(cached baseline)" in m else
                                     "interleaved" if "interleaved" in m else "session"))
        if self.compile_ref_timing is not None:
            parts.append("compile " + ("cached" if "(cached baseline)" in self.compile_ref_timing.method
                                       else "session"))
        return ", ".join(parts)

    @property
    def speedup_vs_compile(self) -> float | None:
        if not self.ok or self.runtime_ms is None or self.compile_ms is None:
            return None
        return self.compile_ms / self.runtime_ms

    def to_json_dict(self) -> dict[str, object]:
        """The `kevolve eval --json` object (a contract: fields are only ever added)."""
        return {
            "status": self.outcome.value,
            "reason": self.reason,
            "speedup": self.speedup,
            "speedup_vs_compile": self.speedup_vs_compile,
            "speedup_launch": self.speedup_launch,
            "fitness": self.fitness,
            "runtime_ms": self.runtime_ms,
            "eager_ms": self.eager_ms,  # the one name; the next two are KernelBench's, kept for the contract
            "compile_ms": self.compile_ms,
            "ref_runtime_ms": self.eager_ms,
            "compile_ref_runtime_ms": self.compile_ms,
            "timing": None if self.timing is None else self.timing.model_dump(),
            "ref_timing": None if self.ref_timing is None else self.ref_timing.model_dump(),
            "compile_ref_timing": None
            if self.compile_ref_timing is None
            else self.compile_ref_timing.model_dump(),
            "launch_timing": None if self.launch_timing is None else self.launch_timing.model_dump(),
            "ref_launch_timing": None if self.ref_launch_timing is None else self.ref_launch_timing.model_dump(),
            "compile_note": self.compile_note,
            "checks": [c.model_dump() for c in self.checks],
            "kernels": [k.model_dump() for k in self.profile.kernels] if self.profile else [],
            "profile": None if self.profile is None else self.profile.model_dump(),
            "ref_profile": None if self.ref_profile is None else self.ref_profile.model_dump(),
            "device": self.device,
            "versions": dict(self.versions),
            "compile_s": self.compile_s,
            "phase_s": dict(self.phase_s),
            "cpu_s": dict(self.cpu_s),
            "seeds": list(self.seeds),
            "wall_s": self.wall_s,
            "audit": None if self.audit is None else self.audit.model_dump(),
            "baseline": self.baseline,
            "candidate_id": self.candidate_id,
            "problem_id": self.problem_id,
        }
