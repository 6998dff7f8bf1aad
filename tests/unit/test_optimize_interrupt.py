"""Ctrl-C during a run, as often as the user likes, then --resume: every finished proposal and evaluation is kept,
none is done twice, and the budget and counts come out true (issue 37).

A real SIGINT to this process from inside a node (the LLM call or the evaluation), the whole graph with the
real SQLite checkpointer, a scripted LLM and the fake sandbox of test_graph_fake_sandbox."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from test_graph_fake_sandbox import PROBLEM, FakeSandbox, config, reply

from kevolve.agent.config import EvolutionConfig, StopConfig
from kevolve.agent.llm.scripted import ScriptedLLM
from kevolve.agent.run import run_optimize
from kevolve.agent.stopping import HeldSignal

REPLIES = [reply("slow", f"v{i}") for i in range(40)]


@pytest.fixture(autouse=True)
def _ctrl_c_raises():
    """SIGINT raising KeyboardInterrupt, as in a terminal: pytest started in the background (nohup, `cmd &`)
    inherits it ignored, and HeldSignal rightly leaves an ignored signal alone."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class Interrupting:
    """Counts the LLM's calls and the sandbox's evaluations over every session; sends SIGINT to this process
    at the `at`-th event of kind `where` ("llm" or "eval") of the current session."""

    def __init__(self) -> None:
        self.calls = 0
        self.evaluations = 0
        self.where, self.at, self.seen = "", 0, 0

    def arm(self, where: str, at: int) -> None:
        self.where, self.at, self.seen = where, at, 0

    def event(self, where: str) -> None:
        if where == self.where:
            self.seen += 1
            if self.seen == self.at:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.3)  # the signal lands while this task and its siblings are in flight

    def llm(self) -> ScriptedLLM:
        owner = self

        class LLM(ScriptedLLM):
            def complete(self, messages, **opts):  # noqa: ANN001, ANN003, ANN201
                owner.event("llm")
                owner.calls += 1
                return super().complete(messages, **opts)

        return LLM([("Task:", REPLIES[self.calls:])])  # a resumed session's script goes on where the last stopped

    def sandbox(self) -> FakeSandbox:
        owner = self

        class Sandbox(FakeSandbox):
            def evaluate(self, problem, candidate, config):  # noqa: ANN001, ANN201
                owner.event("eval")
                owner.evaluations += 1
                return super().evaluate(problem, candidate, config)

        return Sandbox()


@pytest.mark.parametrize("stops", [[("llm", 5)], [("llm", 2), ("eval", 1)], [("llm", 3), ("eval", 1), ("llm", 1)],
                                   [("eval", 2), ("eval", 3)]],
                         ids=["after-4-evaluations", "propose-then-evaluate", "three-stops", "evaluate-twice"])
def test_every_ctrl_c_then_resume_keeps_each_finished_job_once(tmp_path, stops) -> None:
    cfg = config(tmp_path).model_copy(update={
        "stop": StopConfig(max_candidates=10, patience=100),
        "evolution": EvolutionConfig(islands=2, jobs_per_generation=4, concurrency=4, seed=7)})
    counter = Interrupting()
    resume = None
    for where, at in stops:
        counter.arm(where, at)
        with pytest.raises(KeyboardInterrupt):
            run_optimize(PROBLEM if resume is None else None, cfg, llm=counter.llm(), sandbox=counter.sandbox(),
                         resume=resume)
        resume = next(tmp_path.iterdir()).name
    counter.arm("", 0)
    r = run_optimize(None, cfg, llm=counter.llm(), sandbox=counter.sandbox(), resume=resume)
    lines = [json.loads(x) for x in (r.run_dir / "trials.jsonl").read_text().splitlines()]
    assert [t["job"] for t in lines].count(lines[0]["job"]) == 1 and len({t["job"] for t in lines}) == len(lines) == 10
    assert not any(t["recovered"] for t in lines)  # no evaluation was done again (read back from disk)
    assert counter.calls == 10 and counter.evaluations == 10  # no LLM call and no evaluation repeated
    assert r.proposals == r.evaluated == 10 and r.stop_reason.startswith("max_candidates")


def test_a_second_signal_is_delivered_at_once_and_one_held_signal_once() -> None:
    held = HeldSignal()
    with pytest.raises(KeyboardInterrupt), held.installed():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # held: nothing raised yet
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1.0)
        except KeyboardInterrupt:
            held.deliver()  # the second raised at once; the first is not delivered again
            raise
        pytest.fail("the second Ctrl-C was held too")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_resume_line_names_each_step_once_with_its_count() -> None:
    from types import SimpleNamespace

    from kevolve.agent.run import _resume_point

    task = SimpleNamespace(name="evaluate")
    assert _resume_point(SimpleNamespace(next=("evaluate",) * 4, tasks=(task,) * 4)) == "evaluate x4"
    assert _resume_point(SimpleNamespace(next=("plan",), tasks=())) == "plan"
    assert _resume_point(SimpleNamespace(next=(), tasks=(task, task))) == ("evaluate x2 (finished before the "
                                                                           "interruption; committed now)")
    assert _resume_point(SimpleNamespace(next=(), tasks=())) == "its end"
