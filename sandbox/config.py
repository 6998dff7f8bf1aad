"""The sandbox's slice of kevolve's configuration."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from kevolve import defaults
from kevolve.records import Record
from kevolve.sandbox.isolate.memory import default_limit_gb


class CompileBaseline(StrEnum):
    AUTO = "auto"  # on for CUDA, off for CPU (inductor's CPU build takes ~30 s a problem)
    ON = "on"
    OFF = "off"


class Backend(StrEnum):
    LOCAL = "local"  # runner processes on this machine (see `isolation`)
    DOCKER = "docker"  # the same runner inside a locked-down container (sandbox/isolate/container.py)


class Isolation(StrEnum):
    AUTO = "auto"  # bubblewrap when it works here, plain processes otherwise
    NONE = "none"  # plain processes: scrubbed env, own session, limits watched from outside
    BWRAP = "bwrap"  # bubblewrap, refusing to run without it


# The environment variable entry points read into `SandboxConfig.bwrap` (a bwrap that is not on
# PATH, e.g. one unpacked from Debian's package by scripts/unpack_bwrap.sh).
BWRAP_ENV = "KEVOLVE_BWRAP"
# The environment variable every entry point reads into `SandboxConfig.confine_writes` (auto|on|off).
CONFINE_ENV = "KEVOLVE_CONFINE_WRITES"


def _confine_default() -> str:
    v = os.environ.get(CONFINE_ENV, "").strip().lower() or "auto"
    if v not in ("auto", "on", "off"):
        import logging

        logging.getLogger("kevolve").warning("%s=%s is not auto, on or off: auto", CONFINE_ENV, v)
        return "auto"
    return v


# What decides how a runner process is started (the judge's spares serve a configuration only if these agree; the
# judge's entry starts its first runners from them alone, judge/boot.py).
RUNNER_FIELDS = frozenset({"backend", "isolation", "bwrap", "scratch_limit_gb", "cache_dir", "pids_limit", "image",
                           "memory_limit_gb", "cpus", "containment"})


class SandboxConfig(Record):
    """How one candidate is evaluated."""

    device: str = Field(default="cuda", description="'cuda', 'cuda:N' or 'cpu'")
    timeout_s: float = Field(default=defaults.TIMEOUT_S, description="hard wall-clock limit per runner job")
    memory_limit_gb: float = Field(default_factory=default_limit_gb, description=(
        "host memory limit of each process of an evaluation (the judge's problem data, each runner's process "
        "group); default: half of what this machine had available when kevolve started (sandbox/isolate/memory.py)"))
    trials: int = Field(default=defaults.TRIALS, description="minimum timed trials (adaptive up to 10x this)")
    max_timing_s: float = Field(default=defaults.MAX_TIMING_S, description="stop adding trials after this long")
    warmup: int = 3
    launch_calls: int = Field(default=12, ge=0, description=(
        "unused since every speed is the judge's clock around batches of calls, launch work included "
        "(sandbox/judge/clock.py); kept so that saved configs still load"))
    max_slowdown: float = Field(default=defaults.MAX_SLOWDOWN, ge=0.0, description=(
        "a candidate whose calls take this many times the reference's (and over half a second each), two calls "
        "in a row after its first, is stopped there: `timeout: too_slow`; 0 = never (only timeout_s ends it)"))
    race_ms: float | None = Field(default=None, ge=0.0, description=(
        "racing (optimize sets it; bench never): the median call (ms, judge's clock) of the best candidate the search "
        "holds; a candidate whose every timed call so far took more than twice it stops timing after five batches "
        "(its speed is then known coarsely, its verdict the same)"))
    n_draws: int = Field(default=5, description="fresh get_inputs() draws, besides shifted ones")
    tolerance_factor: float = Field(default=defaults.TOLERANCE_FACTOR, description="allowed error = factor x eager's + floor")
    seed: int | None = Field(default=None, description="base seed for draws; None = fresh per run")
    allow_torch_only: bool = False
    compile_baseline: CompileBaseline = CompileBaseline.AUTO
    ncu: bool = False
    profile: bool = True
    cache_dir: Path = Field(default=Path.home() / ".cache" / "kevolve", description="builds, references")
    backend: Backend = Backend.LOCAL
    isolation: Isolation = Field(default=Isolation.AUTO, description="how the local backend confines runners")
    bwrap: str | None = Field(default_factory=lambda: os.environ.get(BWRAP_ENV) or None,
                              description=f"the bubblewrap binary to run (default: {BWRAP_ENV}, so that every entry "
                              "point and script honours it); None = bwrap on PATH")
    scratch_limit_gb: float = Field(default=8.0, description="bytes a runner may leave in its scratch dir")
    image: str = Field(default="kevolve-eval:latest", description="Docker image of the evaluation worker")
    cpus: float = Field(default=2.0, description="CPU limit of a Docker worker")
    pids_limit: int = Field(default=512, description="process/thread limit of a sandboxed worker")
    confine_writes: Literal["auto", "on", "off"] = Field(default_factory=_confine_default, description=(
        "without a sandbox (isolation none), take file-system writes away from a candidate's runner outside its "
        "scratch directory with Linux's Landlock, before its code loads; auto = every such runner, CPU and GPU, where "
        f"the kernel has Landlock (default: {CONFINE_ENV}, else auto)"))
    containment: str | None = Field(default=None, description="how a runner's descendants are killed with it: "
                                    "cgroup | subreaper | process_group; None = the best this machine offers")
    audit: bool = Field(default=False, description="measure every ok verdict again (fresh runner, fresh inputs, "
                        "the judge's own clock); a disagreement overturns it (audit_mismatch)")
    audit_tolerance: float | None = Field(
        default=None, description="an audit's speedup may fall below the evaluation's by this fraction and the verdict "
        "stands at the audit's lower speed; further below, a second audit decides and overturns it if it disagrees too "
        "(a faster audit never overturns); None = 0.30 on a GPU (one honest kernel's median call moved by 26 % between "
        "fresh processes on the H100), 0.50 on the CPU (a shared machine's timings move by more)")

    @property
    def audit_agree(self) -> float:
        if self.audit_tolerance is not None:
            return self.audit_tolerance
        return 0.30 if self.is_cuda else 0.50
    policy_allow: tuple[str, ...] = Field(
        default=(), description="candidate-policy categories to permit before anything runs (sandbox/policy/); "
                                "'all' turns the policy off")

    @field_validator("policy_allow")
    @classmethod
    def _known_categories(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        from kevolve.sandbox.policy.candidate import validate_allow

        validate_allow(v)  # UnknownCategory is a ValueError: pydantic reports it as a validation error
        return tuple(dict.fromkeys(v))

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def want_compile_baseline(self) -> bool:
        if self.compile_baseline is CompileBaseline.AUTO:
            return self.is_cuda
        return self.compile_baseline is CompileBaseline.ON
