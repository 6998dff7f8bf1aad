"""What an optimize run returns (`kevolve.optimize(...) -> Result`) and writes to result.json."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from pydantic import Field

from kevolve.records import Answer, Record

log = logging.getLogger(__name__)


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


class PartSummary(Record):
    """One part of a whole model optimized in parts (`optimize --parts`): where it is, its loop, what it became."""

    index: int
    paths: tuple[str, ...] = Field(description="where it is in the model (submodule paths)")
    spelled: str = Field(description="the submodule's constructor call, e.g. 'Block(64)'")
    share: float | None = Field(default=None, description="its share of eager's CPU time of one forward of the model")
    run_id: str | None = Field(default=None, description="its own optimize run (under the run's parts/); None when "
                               "it was not optimized")
    answer: Answer | None = Field(default=None, description="its own run's answer")
    speedup: float | None = Field(default=None, description="its best correct candidate's speedup over its eager")
    candidate_id: str | None = Field(default=None, description="the candidate put in the composition, if any")
    note: str = Field(default="", description="why it stays PyTorch, where it does")
    dropped: str = Field(default="", description=(
        "why its candidate was taken out of the composition: a composition with it was judged not ok and it had the "
        "least gain (share x (1 - 1/speedup)) of the parts still in; empty where it was not dropped"))


class CompositionTry(Record):
    """One composition of part candidates judged as the whole model (`optimize --parts`), in the order tried."""

    parts: tuple[int, ...] = Field(description="the parts whose candidates it holds (their indices)")
    candidate_id: str | None = Field(default=None, description="its candidate (candidates/<id>.py, .json with the "
                                     "verdict); None where the sources could not be composed")
    outcome: str = Field(description="the verdict's outcome ('ok', 'incorrect' …), or 'not_composed'")
    reason: str = Field(default="", description="the verdict's reason, one line")


class Result(Record):
    """A finished (or stopped) run."""

    run_id: str
    run_dir: Path
    problem: str
    stop_reason: str
    best_candidate_id: str | None = None
    answer: Answer = Field(default=Answer.NONE_CORRECT, description=(
        "improved (a correct kernel faster than eager), not_faster (keep your module) or none_correct"))
    best_path: Path | None = Field(default=None, description=(
        "best_model.py: the fastest correct ModelNew; a drop-in replacement only when `answer` is improved"))
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
    device_s: float = Field(default=0.0, description=(
        "seconds the run's evaluations held the device (their wall time, audits included): what --budget-device "
        "counts"))
    lineage: tuple[LineageStep, ...] = ()
    parts: tuple[PartSummary, ...] = Field(default=(), description=(
        "optimize --parts: each part's loop and what it became; the fields above are then the composition's verdict "
        "as the whole model (speedup vs the whole model's eager and torch.compile) and the parts' runs summed"))
    compositions: tuple[CompositionTry, ...] = Field(default=(), description=(
        "optimize --parts: each composition judged, in order: the first holds every chosen part; each next one a "
        "part fewer, while none was ok (PartSummary.dropped says which and why)"))

    @property
    def message(self) -> str:
        """One line for the user: what the run found and what to do with it."""
        line = self.answer.line(self.speedup)
        if self.answer is Answer.NONE_CORRECT and not self.proposals:
            return f"nothing was tried ({self.stop_reason}): keep your module"
        if self.answer is Answer.IMPROVED:
            return f"{line}: drop in {self.best_path} (class ModelNew, same constructor as Model)"
        return line

    def load_model_class(self, even_if_slower: bool = False) -> type:
        """The class to use in place of the module: best_model.py's ModelNew when the run improved on eager
        (`ModelNew(*init_args)` replaces the module); otherwise the original `Model` (the run's problem.py),
        with a logged warning saying why. `even_if_slower` returns the fastest correct ModelNew regardless."""
        if self.answer is Answer.IMPROVED or (even_if_slower and self.best_path is not None):
            assert self.best_path is not None
            return _load(self.best_path, f"kevolve_best_{self.run_id.replace('-', '_')}").ModelNew
        log.warning("run %s: %s; returning the original Model", self.run_id, self.message)
        return _load(self.run_dir / "problem.py", f"kevolve_problem_{self.run_id.replace('-', '_')}").Model


def _load(path: Path, name: str):  # noqa: ANN202 - a module
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
