"""Records that cross the parent <-> worker process boundary (JSON files in the scratch dir)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kevolve.records import CheckResult, Profile, Record, TimingStats

TRANSFORMS = ("identity", "negate", "scale", "normal")


class Draw(Record):
    """One set of inputs: get_inputs() under `seed`, float tensors then transformed."""

    key: str
    seed: int
    transform: Literal["identity", "negate", "scale", "normal"] = "identity"


class OutputSpec(Record):
    shape: tuple[int, ...]
    dtype: str


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


class DrawReport(Record):
    """Reference-side facts about one draw."""

    key: str
    finite: bool
    eager_vs_f64: float | None = None  # eager's own max relative error against float64
    eager_err: tuple[tuple[float, float], ...] = Field(
        default=(), description="per output: eager's (max-norm, 2-norm) relative error against float64")


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
