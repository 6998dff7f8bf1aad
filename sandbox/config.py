"""The sandbox's slice of kevolve's configuration."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field

from kevolve.records import Record


class CompileBaseline(StrEnum):
    AUTO = "auto"  # on for CUDA, off for CPU (inductor's CPU build takes ~30 s a problem)
    ON = "on"
    OFF = "off"


class SandboxConfig(Record):
    """How one candidate is evaluated."""

    device: str = Field(default="cuda", description="'cuda', 'cuda:N' or 'cpu'")
    timeout_s: float = Field(default=300.0, description="hard wall-clock limit per worker job")
    memory_limit_gb: float = Field(default=32.0, description="host RSS limit of a worker's process group")
    trials: int = Field(default=30, description="minimum timed trials (adaptive up to 10x this)")
    max_timing_s: float = Field(default=10.0, description="stop adding trials after this long")
    warmup: int = 3
    n_draws: int = Field(default=5, description="fresh get_inputs() draws, besides shifted ones")
    tolerance_factor: float = Field(default=8.0, description="allowed error = factor x eager's + floor")
    seed: int | None = Field(default=None, description="base seed for draws; None = fresh per run")
    allow_torch_only: bool = False
    compile_baseline: CompileBaseline = CompileBaseline.AUTO
    ncu: bool = False
    profile: bool = True
    cache_dir: Path = Field(default=Path.home() / ".cache" / "kevolve", description="builds, references")

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def want_compile_baseline(self) -> bool:
        if self.compile_baseline is CompileBaseline.AUTO:
            return self.is_cuda
        return self.compile_baseline is CompileBaseline.ON
