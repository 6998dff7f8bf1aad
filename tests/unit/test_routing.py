"""Routing functions on hand-built states and trials."""

from __future__ import annotations

from langgraph.types import Send

from kevolve.agent.routing import after_plan, after_select, race_ms
from kevolve.agent.state import Job, Trial
from kevolve.contract import problem_from_source
from kevolve.records import Candidate, Evaluation, Origin, Outcome, TimingStats

PROBLEM = problem_from_source("class Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n", "p.py")


def trial(outcome: Outcome | None, depth: int = 0, src: str = "class ModelNew: pass\n", status: str = "evaluated") -> Trial:
    cand = Candidate.from_source(src, PROBLEM.id)
    ev = None if outcome is None else Evaluation(candidate_id=cand.id, problem_id=PROBLEM.id, outcome=outcome,
                                                 reason=f"{outcome.value}: x")
    return Trial(job=Job(id="g0-j0", operator=Origin.TRANSLATE, island=0, generation=0), status=status,  # type: ignore[arg-type]
                 candidate=cand, evaluation=ev, repair_depth=depth)


def test_after_plan_sends_one_task_per_job_with_its_evaluated_parents() -> None:
    parent = trial(Outcome.COMPILE_ERROR)
    dup = parent.model_copy(update={"evaluation": None, "status": "duplicate"})  # same id, no verdict
    jobs = [Job(id="g1-j0", operator=Origin.REPAIR, island=0, generation=1, parent_ids=(parent.candidate_id,)),  # type: ignore[arg-type]
            Job(id="g1-j1", operator=Origin.TRANSLATE, island=1, generation=1)]
    sends = after_plan({"problem": PROBLEM, "jobs": jobs, "trials": [parent, dup], "examples": ["ex"]})
    assert isinstance(sends, list) and all(isinstance(s, Send) and s.node == "propose" for s in sends)
    assert [s.arg["job"].id for s in sends] == ["g1-j0", "g1-j1"]
    assert sends[0].arg["parents"] == [parent] and sends[1].arg["parents"] == []
    assert sends[0].arg["examples"] == ["ex"]


def test_after_plan_finishes_without_jobs_or_after_a_stop() -> None:
    assert after_plan({"problem": PROBLEM, "jobs": []}) == "finish"
    job = Job(id="g0-j0", operator=Origin.TRANSLATE, island=0, generation=0)
    assert after_plan({"problem": PROBLEM, "jobs": [job], "stop_reason": "budget: x"}) == "finish"


def test_after_select_loops_until_a_stop_rule_fires() -> None:
    assert after_select({"stop_reason": None}) == "plan"
    assert after_select({"stop_reason": "target: 3x"}) == "finish"


def test_each_task_carries_the_median_call_of_the_best_candidate_so_far_for_racing() -> None:
    def stats(ms: float) -> TimingStats:
        return TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, trials=30, method="m")

    def timed(src: str, ms: float, speedup: float, outcome: Outcome = Outcome.OK) -> Trial:
        t = trial(outcome, src=src)  # eager at 1 ms: the speedup is 1 / ms
        return t.model_copy(update={"evaluation": t.evaluation.model_copy(  # type: ignore[union-attr]
            update={"timing": stats(ms), "ref_timing": stats(ms * speedup)})})

    assert race_ms([trial(Outcome.INCORRECT)]) is None  # nothing correct yet: nothing to race against
    fast, slow, wrong = timed("a = 1\n", 0.5, 2.0), timed("b = 2\n", 2.0, 0.5), timed("c = 3\n", 0.1, 9.0, Outcome.INCORRECT)
    assert race_ms([slow, fast, wrong]) == 0.5  # the best correct one's, not an incorrect one's
    job = Job(id="g1-j0", operator=Origin.MUTATE, island=0, generation=1, parent_ids=(fast.candidate_id,))  # type: ignore[arg-type]
    sends = after_plan({"problem": PROBLEM, "jobs": [job], "trials": [slow, fast, wrong]})
    assert isinstance(sends, list) and sends[0].arg["race_ms"] == 0.5
