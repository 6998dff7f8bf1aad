"""Evaluate candidates in isolated worker processes: compile, verify, time, profile.

`Sandbox.evaluate(problem, candidate, config) -> Evaluation` never raises for a bad candidate.
Modules here are imported lazily by the CLI; the judge runs `kevolve.sandbox.judge.boot` (then judge/serve.py), candidates
run in `kevolve.sandbox.runner.serve` processes (see sandbox/judge/serve.py).
"""

from __future__ import annotations

from typing import Protocol

from kevolve.records import Candidate, Evaluation, Problem
from kevolve.sandbox.config import SandboxConfig


class Sandbox(Protocol):
    def evaluate(self, problem: Problem, candidate: Candidate, config: SandboxConfig) -> Evaluation: ...


__all__ = ["Sandbox", "SandboxConfig"]
