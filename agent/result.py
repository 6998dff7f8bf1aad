"""What an optimize run returns (`kevolve.optimize(...) -> Result`) and writes to result.json."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pydantic import Field

from kevolve.records import Record


class LineageStep(Record):
    """One ancestor of the winner (the first is the translation it all started from)."""

    candidate_id: str
    operator: str
    generation: int
    outcome: str
    speedup: float | None
    reason: str
    parent_ids: tuple[str, ...] = ()
    lines_changed: int = Field(default=0, description="lines added + removed against its first parent")


class Result(Record):
    """A finished (or stopped) run."""

    run_id: str
    run_dir: Path
    problem: str
    stop_reason: str
    best_candidate_id: str | None = None
    best_path: Path | None = Field(default=None, description="best_model.py: the drop-in ModelNew")
    speedup: float | None = Field(default=None, description="vs PyTorch eager")
    speedup_vs_compile: float | None = None
    best_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    proposals: int = 0
    evaluated: int = 0
    outcomes: dict[str, int] = Field(default_factory=dict)
    generations: int = 0
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_replies: int = 0
    elapsed_s: float = 0.0
    lineage: tuple[LineageStep, ...] = ()

    def load_model_class(self) -> type:
        """Import best_model.py and return its ModelNew: `ModelNew(*init_args)` replaces the module."""
        if self.best_path is None:
            raise LookupError(f"run {self.run_id} found no correct candidate ({self.stop_reason})")
        spec = importlib.util.spec_from_file_location(f"kevolve_best_{self.run_id.replace('-', '_')}", self.best_path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.ModelNew
