"""Planning a run (what is left to do after a kill) and splitting cores between lanes and compiling."""

from __future__ import annotations

from pathlib import Path

from kevolve.kernelbench.runner import make_plan, split_cores
from kevolve.kernelbench.solutions import discover
from kevolve.kernelbench.suite import load_suite
from kevolve.records import Candidate


def test_plan_skips_finished_candidates_and_gives_problem_verdicts(fixtures: Path) -> None:
    probs = load_suite(fixtures / "suite", [1, 4])
    sols = discover(fixtures / "suite_solutions")
    relu = probs[0]
    src = Path(sols[(1, 1)][0].path).read_text()
    done = {(relu.problem.id, "sample_0", Candidate.from_source(src, relu.problem.id).id)}  # type: ignore[union-attr]
    plan = make_plan(probs, sols, done)
    assert plan.skipped == 1
    assert [c.label for c in plan.jobs[0].candidates] == ["sample_1"]  # only the unfinished one of problem 1
    assert plan.total == 6
    assert {(r.file, r.status) for r in plan.problem_rows} == {("6_Tanh.py", "no_solution"),
                                                             ("1_tiny_hf_model.py", "unavailable")}


def test_a_problem_whose_agent_failed_stays_unfinished(fixtures: Path) -> None:
    probs = load_suite(fixtures / "suite", [1], problems="6")
    plan = make_plan(probs, {}, set(), {(1, 6): "infra_error: the agent failed: worker lost"})
    [row] = plan.problem_rows
    assert row.status == "infra_error" and not row.finished
    plan = make_plan(probs, {}, set(), {(1, 6): "no_solution: the agent found no correct kernel (budget)"})
    assert plan.problem_rows[0].status == "no_solution" and plan.problem_rows[0].finished


def test_finished_problem_verdicts_are_not_planned_again(fixtures: Path) -> None:
    probs = load_suite(fixtures / "suite", [4])
    assert make_plan(probs, {}, {(probs[0].problem.id, "", "")}).problem_rows == []  # type: ignore[union-attr]


def test_lanes_and_the_compile_pool_get_disjoint_cores() -> None:
    lanes, comp = split_cores(2, 100, list(range(16)))
    assert lanes == [{0}, {1}] and comp == set(range(2, 16))
    lanes, comp = split_cores(1, 0, [0, 1])
    assert lanes == [{0, 1}] and comp == set()
    lanes, comp = split_cores(1, 1, [0, 1])  # two cores: one times, one compiles
    assert lanes == [{0}] and comp == {1}
    lanes, comp = split_cores(4, 8, [0, 1, 2])  # fewer cores than lanes: no compile pool, lanes share
    assert comp == set() and all(lanes)


def test_a_solution_named_for_another_problem_of_the_suite_is_not_paired_by_its_number(fixtures: Path,
                                                                                       tmp_path: Path) -> None:
    """Pairing is by level and number; a mirror-layout file named for another problem of the same level (another
    KernelBench version's numbering) is not evaluated against the problem of its number: the reason says why.
    Any other name after the number still pairs."""
    probs = load_suite(fixtures / "suite", [1])
    relu_src = Path(discover(fixtures / "suite_solutions")[(1, 1)][0].path).read_text()
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "2_Tanh.py").write_text(relu_src)  # the suite's Tanh is 6, its 2 is Sigmoid
    (tmp_path / "level1" / "1_relu-fast.py").write_text(relu_src)  # its own name: paired with 1_ReLU
    (tmp_path / "level1" / "3_my_kernel.py").write_text(relu_src)  # a name no problem has: paired with 3
    plan = make_plan(probs, discover(tmp_path), set())
    planned = {job.problem.file: [c.label for c in job.candidates] for job in plan.jobs}
    assert planned == {"1_ReLU.py": ["1_relu-fast"], "3_Scale.py": ["3_my_kernel"]}
    why = {r.file: r.reason for r in plan.problem_rows}
    assert why["2_Sigmoid.py"].startswith("no_solution: the solution set's 2_Tanh.py names another problem than "
                                          "2_Sigmoid.py"), why
