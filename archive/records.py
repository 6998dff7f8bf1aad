"""Typed records the archive hands out (search hits, kernel details, stats) and takes in (filters)."""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import Field

from kevolve.records import Candidate, Evaluation, Problem, Record


class Entry(Record):
    """One evaluated candidate to put in the archive."""

    problem: Problem
    candidate: Candidate
    evaluation: Evaluation
    kernel_name: str = Field(default="", description="a human name for the kernel (Sakana's Kernel_Name)")
    run_id: str | None = None


class KernelFilter(Record):
    """Restricts listing and search. Every field is optional; strings match case-insensitively."""

    level: int | None = Field(default=None, description="KernelBench level")
    op: str | None = Field(default=None, description="substring of the problem's op name, e.g. 'matmul'")
    device: str | None = Field(default=None, description="substring of the device name, e.g. 'H100'")
    min_speedup: float | None = Field(default=None, description="best speedup over eager at least this")
    technique: str | None = Field(default=None, description="a technique tag, e.g. 'shared_memory'")
    outcome: str | None = Field(default="ok", description="best outcome; None for any")
    problem_id: str | None = Field(default=None, description="only kernels of this problem")
    run_id: str | None = Field(default=None, description="only kernels that this run evaluated (any of their evaluations)")


class ArchivedKernel(Record):
    """One kernel in the archive with its best verdict; what search, listing and retrieve return."""

    id: str = Field(description="candidate id (content hash of the source)")
    problem_id: str
    problem_name: str
    op_name: str
    level: int | None
    task_id: int | None
    kernel_name: str
    outcome: str = Field(description="best outcome over its evaluations")
    speedup: float | None = Field(description="eager time / kernel time (best evaluation)")
    speedup_compile: float | None = Field(description="torch.compile time / kernel time")
    runtime_ms: float | None
    ref_runtime_ms: float | None
    compile_ref_runtime_ms: float | None
    device: str
    techniques: tuple[str, ...]
    origin: str
    proposer: str
    generation: int | None = Field(default=None, description="the optimize generation that proposed it (None: "
                                   "imported, bench, or stored before generations were kept)")
    created_at: datetime
    source: str | None = Field(default=None, description="the ModelNew source (left out of listings)")
    score: float | None = Field(default=None, description="search relevance (reciprocal-rank fusion)")


class EvaluationSummary(Record):
    """One stored evaluation of a kernel; ``record`` is the sandbox's full Evaluation."""

    run_id: str | None
    outcome: str
    reason: str
    device: str
    runtime_ms: float | None
    speedup: float | None
    speedup_compile: float | None
    max_diff: float | None
    created_at: datetime
    record: Evaluation


class LineageEdge(Record):
    """parent → child (ids); either end may be outside the archive."""

    parent: str
    child: str


class LineageNode(Record):
    """A kernel of a lineage graph as its nodes are labelled: how it was made and its best verdict."""

    id: str
    origin: str = Field(description="translate, repair, mutate, crossover, offline, imported")
    outcome: str = Field(description="its best outcome")
    speedup: float | None = Field(default=None, description="its best speedup over eager")


class KernelDetail(Record):
    """A kernel with its problem's source, every evaluation, and its lineage (ancestors and descendants)."""

    kernel: ArchivedKernel
    problem_source: str
    parent_ids: tuple[str, ...]
    evaluations: tuple[EvaluationSummary, ...]
    lineage: tuple[LineageEdge, ...]
    lineage_nodes: tuple[LineageNode, ...] = Field(default=(), description=(
        "the lineage's kernels that are in the archive, with what labels them (an edge's end may be outside it)"))


class ProblemSummary(Record):
    """A problem with its kernel count and best speedup."""

    id: str
    name: str
    op_name: str
    level: int | None
    task_id: int | None
    kernels: int
    ok_kernels: int
    best_speedup: float | None


class RunSummary(Record):
    """A run that stored kernels (optimize, bench, import), for choosing one to filter by."""

    id: str
    kind: str = Field(description="optimize, bench, import (or '' where the writer did not say)")
    created_at: datetime
    kernels: int = Field(description="distinct kernels it evaluated")


class ArchiveStats(Record):
    """Counts over the whole archive."""

    problems: int
    kernels: int
    ok_kernels: int
    evaluations: int
    runs: int
    by_outcome: dict[str, int]
    by_technique: dict[str, int]
    best_speedup: float | None


_NAME = re.compile(r"^(\d+)_(.+)$")


def split_problem_name(name: str) -> tuple[int | None, str]:
    """'19_ReLU' → (19, 'ReLU'); names without a task number keep their whole text."""
    m = _NAME.match(name)
    return (int(m.group(1)), m.group(2)) if m else (None, name)


_ERR = re.compile(r"(?:\berr|max error)\s+([0-9.]+(?:e[+-]?\d+)?)", re.I)


def max_diff(ev: Evaluation) -> float | None:
    """The largest output error the correctness checks reported, when they reported one."""
    found = [float(m.group(1)) for c in ev.checks if c.name.startswith("correct") for m in _ERR.finditer(c.detail)]
    return max(found) if found else None
