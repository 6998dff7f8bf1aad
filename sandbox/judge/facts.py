"""What one candidate's session established (runs in the judge, trusted): the facts `verdict.py` turns into an
Evaluation, and the two ways a session ends early."""

from __future__ import annotations

from dataclasses import dataclass, field

from kevolve.sandbox.common import harness as h
from kevolve.sandbox.common.protocol import RunnerFinal, StepResult
from kevolve.sandbox.judge.checks import Ledger
from kevolve.sandbox.judge.clock import Window
from kevolve.sandbox.judge.runner_proc import Gone


class ForgedAnswer(h.StageError):
    """An answer in a reference runner's channel that the runner did not write (reference_runner.ReferenceRunner)."""


class Verdict(Exception):
    """The session ends now with this outcome (raised inside the session only)."""

    def __init__(self, status: str, reason: str, log: str = "", gone: Gone | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.log, self.gone = status, reason, log, gone


@dataclass
class Facts:
    """What a session established; `verdict.py` turns it into an Evaluation."""

    ledger: Ledger = field(default_factory=Ledger)
    phase_s: dict[str, float] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)
    load_s: float | None = None
    profile: StepResult | None = None
    final: RunnerFinal | None = None
    stop: Verdict | None = None
    phase: str = "start-up"
    ablated: int = 0  # extension calls an ablation call replaced (0: nothing to ablate)
    ablation_still_right: bool = False
    clock: list[tuple[float, float, float, float]] = field(default_factory=list)  # judge ms / claimed ms, cand and ref
    # the timed batches by the judge's clock (clock.py), candidate's and reference's in pairs, and the
    # empty batches' round trips on each side; never-seen calls as batches of one
    batches: list[Window] = field(default_factory=list)
    ref_batches: list[Window] = field(default_factory=list)
    empty: list[Window] = field(default_factory=list)
    ref_empty: list[Window] = field(default_factory=list)
    # GPU, clock.NET: batches of null calls (the harness alone) on each side, what a call of the harness costs
    null: list[Window] = field(default_factory=list)
    ref_fresh: list[Window] = field(default_factory=list)  # the reference alone on each never-seen draw (a diagnostic)
    ref_null: list[Window] = field(default_factory=list)
    fresh: list[Window] = field(default_factory=list)
    control: list[Window] = field(default_factory=list)  # a batch of one on a seen draw before each fresh one
    batch_draws: str = "pool"  # what the timed batches read: "timing" (never-seen draws) or "pool"
    timing_stop: str = ""  # why the timed batches stopped where they did (schedule.stop_reason)
    # timed and never-seen calls: the candidate runner's CPU seconds (cgroup) before the command, at its
    # account and at its vetting's answer, and the call's window (ms); the reference's CPU in its calls'
    # windows and vettings (verdict.cpu_rule)
    cpu_calls: list[tuple[float, float, float, float]] = field(default_factory=list)
    ref_cpu: list[tuple[float, float]] = field(default_factory=list)
    active_ms: list[float] = field(default_factory=list)  # timed and never-seen calls: command to vetting's answer
    # over the timing phase: CPU seconds of the runner's processes, and seconds it spent inside calls
    cpu_window: tuple[float, float] | None = None


__all__ = ["Facts", "ForgedAnswer", "Verdict"]
