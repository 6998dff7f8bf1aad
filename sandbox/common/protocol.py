"""Records that cross process boundaries: parent <-> judge, judge <-> runner.

The judge (trusted) drives a runner (untrusted) one call at a time. A runner's messages are
claims: the judge validates them with `model_validate`, and anything malformed is a verdict.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from kevolve.records import CheckResult, Profile, Record, TimingStats

TRANSFORMS = ("identity", "negate", "scale", "normal", "wide")


class Draw(Record):
    """One set of inputs: get_inputs() under `seed`, float tensors then transformed."""

    key: str
    seed: int
    transform: Literal["identity", "negate", "scale", "normal", "wide"] = "identity"


class OutputSpec(Record):
    shape: tuple[int, ...]
    dtype: str


# ----------------------------------------------------------------- judge -> runner

class RunnerJob(Record):
    """What one runner runs: a candidate's ModelNew, or the problem's Model (eager or compiled)."""

    role: Literal["candidate", "eager", "compiled"]
    source: str = Field(description="the candidate's source, or the problem's for eager/compiled")
    init_seed: int
    init_args: dict[str, Any] = Field(description="get_init_inputs() as transport.share encodes it")
    slots: tuple[dict[str, Any], ...] = Field(description="input sets (transport.share encoding), by slot")
    staging: tuple[dict[str, Any], ...] = Field(default=(), description="TensorRefs the outputs are copied to")
    staging_sets: tuple[tuple[dict[str, Any], ...], ...] = Field(default=(), description=(
        "more sets of TensorRefs like `staging`: a batch's k-th call stages into set k (set 0 is `staging`)"))
    outputs: tuple[OutputSpec, ...] = Field(default=(), description="the reference's output layout (poisoning)")
    cache_dir: str
    build_dir: str | None = None
    custom_kernel_names: tuple[str, ...] = ()
    confine_writes: bool = Field(default=False, description=(
        "take file-system writes away outside the runner's scratch directory and /dev/shm before the model's code "
        "loads (landlock.py): a candidate's runner without a sandbox"))
    threads: int = Field(default=1, description="intra-op threads for this runner, the same for every role")
    may_alias_inputs: bool = Field(default=False, description=(
        "the reference's own outputs share memory with its inputs (a view): a candidate's may too; otherwise a "
        "candidate's output that does is rejected (aliases_input: the harness's staging copy would do its work)"))
    gate: str | None = Field(default=None, description=(
        "the file in the runner's scratch holding a timed batch's gate words (common/gate.py)"))
    check_symbols: bool = Field(default=True, description=(
        "check every built extension's imported symbols before loading it (sandbox/build/symbols.py); off only "
        "where the policy allows native code"))


class StepResult(Record):
    """A runner's account of one call (times are its claims; outputs are checked by the judge)."""

    ok: bool
    nonce: int = Field(default=0, description="echoes the command's: a reply forged without it is bad_report")
    part: Literal["call", "vet"] = Field(default="call", description=(
        "each call is answered twice: its account once its outputs are staged, then its vetting's outcome"))
    status: Literal["done", "compile_error", "runtime_error", "crashed", "rejected"] = "done"
    reason: str = ""
    log: str = ""
    ms: float = 0.0
    wall_ms: float = 0.0
    host_ms: float = 0.0
    covered: bool = Field(default=True, description="the GPU pad outlasted the host's queuing of the call")
    outputs: tuple[OutputSpec, ...] = ()
    staged: bool = False
    profile: Profile | None = None
    unjoined_stream_kernels: tuple[str, ...] = ()
    ablated: int = Field(default=0, description="extension calls whose results an ablation call replaced")
    calls: int = Field(default=1, description="calls this answer accounts for (a batch's; 0: an empty batch)")


class RunnerFinal(Record):
    """What a runner reports when told to finish."""

    tampered: tuple[str, ...] = ()
    settings_changed: tuple[str, ...] = ()
    l2_raised: str = ""
    device_name: str = ""
    versions: dict[str, str] = Field(default_factory=dict)


# ----------------------------------------------------------------- parent <-> judge

class DrawReport(Record):
    """Reference-side facts about one draw."""

    key: str
    finite: bool
    eager_vs_f64: float | None = None  # eager's own max relative error against float64
    eager_err: tuple[tuple[float, ...], ...] = Field(
        default=(), description="per output: eager's (max-norm, 2-norm) relative error against float64 and its "
                                "count of elements off by more than half their value (sandbox/judge/correctness.py)")


class ReferenceSummary(Record):
    """What the parent learns about a problem once the judge has prepared it."""

    problem_id: str
    seed: int
    device_name: str
    versions: dict[str, str] = Field(default_factory=dict)
    eager: TimingStats | None = None
    compiled: TimingStats | None = None
    compile_note: str = ""
    profile: Profile | None = None
    draws: tuple[DrawReport, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    min_bytes: int | None = None
    flops: int | None = None
    phase_s: dict[str, float] = Field(default_factory=dict)
    residency: str = Field(default="device", description="where inputs and truth are kept: device | host | "
                           "regenerated (made again on the device when used)")


class Progress(Record):
    """Where the judge is in a request, told to the parent before its reply (sandbox/judge/progress.py): the live
    line of `kevolve eval`. Trusted: the judge writes these, never a runner."""

    phase: str = Field(description="what the judge works on now: reference, compile, correctness, timing, …")
    left_s: float | None = Field(default=None, ge=0, description=(
        "the judge's bound on the seconds left until its reply, from the schedule and this request's measurements "
        "(sandbox/judge/eta.py); None while a phase ahead has no measure (the build, the reference's preparation)"))

    @classmethod
    def read(cls, message: Any) -> Progress | None:
        """A channel's {"progress": …} payload as a record, None if it is not one (progress never fails a request)."""
        try:
            return cls.model_validate(message)
        except ValueError:
            return None


class JudgeReply(Record):
    """The judge's answer to one request: exactly one of the fields is set."""

    evaluation: dict[str, Any] | None = None
    reference: ReferenceSummary | None = None
    problem_error: str | None = None
    infra_error: str | None = None
    ok: bool = False


# ----------------------------------------------------------------- one-shot workers (bench baselines)

class WorkerRequest(Record):
    """What the parent asks one worker to do."""

    task: Literal["reference", "candidate"]
    problem_source: str
    candidate_source: str = ""
    device: str
    init_seed: int
    draws: tuple[Draw, ...]
    outputs: tuple[OutputSpec, ...] = Field(default=(), description="reference output layout")
    trials: int = 30
    max_timing_s: float = 10.0
    warmup: int = 3
    time_compile: bool = False
    profile: bool = True
    ncu: bool = False
    cache_dir: str
    build_dir: str | None = Field(default=None, description="private build dir when the cache is read-only")
    custom_kernel_names: tuple[str, ...] = ()


class WorkerReport(Record):
    """What a worker hands back (besides the tensors in outputs.pt)."""

    status: Literal["done", "problem_error", "compile_error", "runtime_error", "crashed",
                    "rejected", "infra_error"]
    reason: str = ""
    device_name: str = ""
    versions: dict[str, str] = Field(default_factory=dict)
    checks: tuple[CheckResult, ...] = ()
    timing: TimingStats | None = None
    compile_timing: TimingStats | None = None
    profile: Profile | None = None
    draws: tuple[DrawReport, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    timed_keys: tuple[str, ...] = Field(default=(), description="keys of timed-call outputs saved")
    compile_s: float | None = None
    min_bytes: int | None = None
    flops: int | None = None
    phase_s: dict[str, float] = Field(default_factory=dict)
    log_tail: str = ""
    timed_window: tuple[float, float] | None = Field(default=None, description=(
        "wall clock (Unix seconds) when the worker's timing began and ended: `kevolve bench baselines` "
        "runs several workers and shows from these that no two were timed at once"))


__all__ = ["CheckResult", "Draw", "DrawReport", "JudgeReply", "OutputSpec", "Progress", "ReferenceSummary", "RunnerFinal",
           "RunnerJob", "StepResult", "TRANSFORMS", "WorkerReport", "WorkerRequest"]
