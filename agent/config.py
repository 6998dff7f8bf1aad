"""The optimizer's slice of kevolve's configuration: one nested, typed object.

Built once at an entry point (the CLI or `kevolve.optimize`) from flags, environment variables and
defaults; each component receives only its own slice. Nothing below the entry points reads
``os.environ``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, model_validator

from kevolve.archive.ingest import IngestMode
from kevolve.records import KernelLanguage, Record
from kevolve.sandbox.config import SandboxConfig

# USD per million tokens (input, output). Override with `prices` in LLMConfig.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "o3": (2.0, 8.0),
    "o4-mini": (1.1, 4.4),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-haiku-4": (1.0, 5.0),
}


class LLMConfig(Record):
    """Which model proposes candidates, and how it is called."""

    provider: str = Field(description="'openai', 'anthropic', 'compatible' (OpenAI wire, any base URL), 'demo' (recorded replies) or 'scripted'")
    model: str = Field(description="model name as the provider spells it")
    base_url: str | None = Field(default=None, description="server URL; None = the vendor's own")
    api_key: SecretStr | None = Field(default=None, exclude=True, description="never written to disk")
    timeout_s: float = Field(default=300.0, description="per-request timeout")
    max_retries: int = Field(default=5, description="retries of a transient error (429, 5xx, timeout)")
    backoff_s: float = Field(default=2.0, description="first retry delay; doubles each retry, with jitter")
    max_backoff_s: float = 60.0
    max_tokens: int = 8192
    temperature: float = 0.8
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=lambda: dict(DEFAULT_PRICES),
        description="USD per million (prompt, completion) tokens, by model-name prefix")
    cache_dir: Path | None = Field(default=None, description="disk cache of replies keyed on the request; None = off")

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def endpoint(self) -> str:
        """The URL requests go to: base_url, else the vendor's own."""
        return self.base_url or _VENDOR_URLS.get(self.provider, "(no URL)")


_VENDOR_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


class EvolutionConfig(Record):
    """The population's shape and the evolutionary operators' settings."""

    islands: int = Field(default=2, ge=1, description="independent sub-populations (migration between them)")
    population: int = Field(default=6, ge=1, description="members kept per island")
    elites: int = Field(default=1, ge=0, description="best members per island mutated every generation (never evicted)")
    jobs_per_generation: int = Field(default=4, ge=1, description="proposals per generation, across islands")
    concurrency: int = Field(default=4, ge=1, description="proposals / evaluations in flight at once")
    migration_every: int = Field(default=3, ge=1, description="generations between migrations (ring topology)")
    max_repairs: int = Field(default=2, ge=0, description="consecutive repairs allowed along one lineage")
    crossover_rate: float = Field(default=0.25, ge=0.0, le=1.0)
    novelty_threshold: float = Field(default=1.0, gt=0.0, le=1.0, description=(
        "sources this similar (after stripping comments and whitespace) are duplicates; 1.0 = identical only"))
    tournament: int = Field(default=3, ge=1, description="tournament size of parent selection")
    seed: int = 0


class StopConfig(Record):
    """When a run ends (whichever comes first)."""

    max_candidates: int = Field(default=40, ge=1, description=(
        "proposals made, each one LLM call (or offline candidate), whatever came back: a verdict, a reply without "
        "code, a duplicate or an LLM error"))
    budget_usd: float | None = Field(default=None, description=(
        "LLM spend limit: a generation gets no more calls than the dollars left pay for at the dearest a call may "
        "cost (agent/budget.py)"))
    budget_tokens: int | None = Field(default=None, ge=1, description=(
        "LLM token limit (prompt + completion, every call): a generation gets no more calls than the tokens left pay "
        "for at the most a call may take (the longest prompt so far plus a full reply of max_tokens)"))
    budget_device_s: float | None = Field(default=None, gt=0, description=(
        "device-seconds limit: the evaluations' wall time summed (the GPU, or the CPU cores a CPU run times on), the "
        "final audit included; a generation gets no more evaluations than the seconds left pay for at the longest "
        "evaluation so far (FIRST_EVAL_S before any), and one evaluation's worth is kept for the audit"))
    time_limit_s: float | None = Field(default=None, description="wall-clock limit of the search")
    target_speedup: float | None = Field(default=None, description="stop once a candidate is this fast vs eager")
    patience: int = Field(default=4, ge=1, description="generations without improvement before stopping")
    max_generations: int = Field(default=50, ge=1)


class OptimizeConfig(Record):
    """Everything one `kevolve optimize` run needs."""

    llm: LLMConfig | None = Field(default=None, description="the LLM that proposes; None only for an offline run")
    offline: bool = Field(default=False, description="the offline generator proposes every candidate (no LLM)")
    offline_seeds: int = Field(default=1, ge=0, description=(
        "on a CUDA LLM run whose module traces, this many first-generation translations come from the "
        "offline generator, for the LLM to improve on"))
    evolution: EvolutionConfig = EvolutionConfig()
    stop: StopConfig = StopConfig()
    sandbox: SandboxConfig = SandboxConfig()
    language: KernelLanguage | None = Field(default=None, description=(
        "the kernel language the prompts ask for (cuda, cupy, triton); None = the target's default: CuPy preferred "
        "on a GPU, any of the three accepted; C++ through load_inline on the CPU"))
    runs_dir: Path = Field(default=Path("runs"), description="run folders are created here")
    parallel_evaluations: int = Field(default=1, ge=1, description=(
        "evaluations at once; 1 keeps timings on one device from overlapping (proposals stay concurrent)"))
    gpus: tuple[int, ...] = Field(default=(), description=(
        "one evaluation lane per GPU (issue 36): each evaluation runs on a free one of these (cuda:N, its own judge "
        "and problem data), one at a time per GPU, all of them at once; () = the sandbox's one device"))

    def lanes(self) -> list[str]:
        """The devices evaluations take turns on: one per GPU of `gpus`, else `parallel_evaluations` of the one."""
        return [f"cuda:{g}" for g in self.gpus] or [self.sandbox.device] * self.parallel_evaluations
    archive: bool = Field(default=True, description=(
        "use the archive: retrieve examples from it, and (unless archive_ingest says otherwise) store candidates"))
    archive_k: int = 3
    archive_reuse: int = Field(default=2, ge=0, description=(
        "kernels the archive already holds for this very problem (same source: a part met in another model, a "
        "problem optimized before), faster than eager on the same kind of device, evaluated first (0: none)"))
    prompts_dir: Path | None = Field(default=None, description=(
        "a folder of prompt files (system.md, translate.md, repair.md, mutate.md, crossover.md) replacing the "
        "package's; files it lacks keep their defaults"))
    race: bool = Field(default=True, description=(
        "time a candidate only until it is plainly slower than the best the search holds (every call over twice "
        "the best's median, five batches in): its speed is then coarse, its verdict the same (issue 36)"))
    audit: bool = Field(default=True, description=(
        "measure the run's winner again before reporting it: a fresh runner, fresh inputs and the judge's own "
        "clock; a winner the audit overturns gives way to the next fastest"))
    archive_ingest: IngestMode | None = Field(default=None, description=(
        "which evaluated candidates go into the archive as their evaluations return: 'winners' (ok and faster "
        "than every one this run stored for the problem), 'all' or 'none'; None = 'all', or 'none' with archive off"))

    @model_validator(mode="before")
    @classmethod
    def _legacy_offline(cls, data: object) -> object:
        """Configs saved before `offline` existed named the offline proposer by a sentinel LLM."""
        if isinstance(data, dict) and "offline" not in data and isinstance(data.get("llm"), dict) and \
                (data["llm"].get("provider"), data["llm"].get("base_url")) == ("compatible", "http://offline"):
            return {**data, "llm": None, "offline": True}
        return data

    @model_validator(mode="after")
    def _llm_unless_offline(self) -> OptimizeConfig:
        if self.llm is None and not self.offline:
            raise ValueError("an LLM is needed unless the run is offline")
        return self

    @property
    def ingest(self) -> IngestMode:
        """The effective ingest mode (see archive_ingest)."""
        if self.archive_ingest is not None:
            return self.archive_ingest
        return IngestMode.ALL if self.archive else IngestMode.NONE
