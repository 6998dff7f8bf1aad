"""Honest answers (issue 37): a run whose best correct kernel is slower than PyTorch eager says "nothing beat
eager: keep your module", hands the original Model back from the Python API with a warning, and reads as
`not_faster` (exit 4); with nothing correct, `none_correct` (exit 5); only a faster kernel is a drop-in."""

from __future__ import annotations

import logging

import pytest
from test_graph_fake_sandbox import PROBLEM, FakeSandbox, config, reply

from kevolve.agent.config import StopConfig
from kevolve.agent.llm.scripted import ScriptedLLM
from kevolve.agent.run import run_optimize
from kevolve.kernelbench.metrics import bench_answer
from kevolve.kernelbench.store import ResultRow
from kevolve.records import Answer


def run(tmp_path, *replies: str):  # noqa: ANN201 - a Result
    cfg = config(tmp_path).model_copy(update={"stop": StopConfig(max_candidates=len(replies), patience=10)})
    return run_optimize(PROBLEM, cfg, llm=ScriptedLLM([("Task:", list(replies))]), sandbox=FakeSandbox())


def test_a_slower_winner_is_not_offered_as_the_answer(tmp_path, caplog) -> None:
    r = run(tmp_path, reply("slow", "a"), reply("slow", "b"))  # 2 ms against eager's 1 ms: 0.50x
    assert r.answer is Answer.NOT_FASTER and r.answer.exit_code == 4
    assert r.message == "nothing beat eager (best 0.50x): keep your module"
    report = (r.run_dir / "report.md").read_text()
    assert "Nothing beat eager (best 0.50x): keep your module." in report and "Drop-in replacement" not in report
    assert "SLOWER than PyTorch eager" in (r.run_dir / "best_model.py").read_text().splitlines()[0]
    with caplog.at_level(logging.WARNING, logger="kevolve.agent.result"):
        cls = r.load_model_class()
    assert cls.__name__ == "Model" and "returning the original Model" in caplog.text
    assert r.load_model_class(even_if_slower=True).__name__ == "ModelNew"


def test_nothing_correct_hands_back_the_original_model(tmp_path) -> None:
    r = run(tmp_path, reply("wrong", "a"))
    assert r.answer is Answer.NONE_CORRECT and r.answer.exit_code == 5 and r.best_path is None
    assert r.load_model_class().__name__ == "Model"
    assert "No candidate was correct: keep your module." in (r.run_dir / "report.md").read_text()


def test_a_faster_winner_is_the_drop_in(tmp_path) -> None:
    r = run(tmp_path, reply("fast"))
    assert r.answer is Answer.IMPROVED and r.answer.exit_code == 0
    assert r.message.startswith("4.00x faster than PyTorch eager: drop in ")
    assert r.load_model_class().__name__ == "ModelNew"
    assert "Drop-in replacement (4.00x faster than PyTorch eager)" in (r.run_dir / "report.md").read_text()


@pytest.mark.parametrize(("speedups", "answer"), [([0.3, None], Answer.NOT_FASTER), ([0.3, 1.2], Answer.IMPROVED),
                                                  ([None], Answer.NONE_CORRECT)])
def test_bench_answers_by_the_best_problem(speedups, answer) -> None:
    rows = [ResultRow(level=1, number=i, file=f"{i}_p.py", label="s", problem_id=str(i),
                      status="ok" if s is not None else "incorrect", speedup=s) for i, s in enumerate(speedups)]
    assert bench_answer(rows)[0] is answer
