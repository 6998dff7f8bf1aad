"""Run store (torn lines, lost lines), KernelBench metrics, reports and compare, on hand-made rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kevolve.kernelbench.compare import CompareError, compare
from kevolve.kernelbench.metrics import problem_results, summarize
from kevolve.kernelbench.report import write_reports
from kevolve.kernelbench.store import ResultRow, RunMeta, RunStore


def meta(name: str = "r") -> RunMeta:
    return RunMeta(name=name, suite="/s", levels=(1,), device="cpu", devices=("cpu",), device_fingerprint="cpu (x)",
                   torch="2.x", seed=1)


def row(number: int, label: str, status: str, speedup: float | None = None, vs_compile: float | None = None,
        pid: str | None = None, level: int = 1) -> ResultRow:
    return ResultRow(level=level, number=number, file=f"{number}_P.py", problem_id=pid or f"p{number:015d}",
                     label=label, candidate_id=f"c{label}{number}", status=status, reason=f"{status}: x",
                     speedup=speedup, speedup_vs_compile=vs_compile, runtime_ms=1.0 if speedup else None,
                     eager_ms=speedup, compile_ms=vs_compile)


def store_with(tmp_path: Path, rows: list[ResultRow], name: str = "r") -> RunStore:
    s = RunStore(tmp_path / name)
    s.create_or_open(meta(name))
    for r in rows:
        s.write(r)
    return s


def test_rows_round_trip_and_infra_errors_are_not_finished(tmp_path: Path) -> None:
    s = store_with(tmp_path, [row(1, "a", "ok", 2.0), row(2, "a", "infra_error")])
    assert {r.status for r in s.rows()} == {"ok", "infra_error"}
    assert s.finished_keys() == {("p000000000000001", "a", "ca1")}


def test_run_json_and_every_line_carry_the_format_and_unversioned_lines_still_read(tmp_path: Path) -> None:
    s = store_with(tmp_path, [row(1, "a", "ok", 2.0)])
    assert json.loads((s.root / "run.json").read_text())["format"] == 2
    line = json.loads(s.jsonl.read_text().splitlines()[0])
    assert line["format"] == 2
    del line["format"]  # as written before the field existed (the same fields otherwise)
    s.jsonl.write_text(json.dumps(line) + "\n")
    assert [r.status for r in s.rows()] == ["ok"]


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    s = store_with(tmp_path, [row(1, "a", "ok", 2.0)])
    with open(s.jsonl, "a") as f:
        f.write('{"level": 1, "numb')  # kill -9 in the middle of a write
    assert [r.label for r in s.rows()] == ["a"]


def test_a_result_file_whose_line_is_missing_is_recovered(tmp_path: Path) -> None:
    s = store_with(tmp_path, [row(1, "a", "ok", 2.0), row(1, "b", "incorrect")])
    lines = s.jsonl.read_text().splitlines()
    s.jsonl.write_text(lines[0] + "\n")  # killed between the result file and the JSONL append
    assert {r.label for r in s.rows()} == {"a", "b"}
    assert len(s.jsonl.read_text().splitlines()) == 2  # and the line is restored


def test_a_reopened_run_keeps_its_stored_seed(tmp_path: Path) -> None:
    s = RunStore(tmp_path / "r")
    s.create_or_open(meta())
    assert s.create_or_open(meta().model_copy(update={"seed": 99})).seed == 1


def test_fast_p_counts_all_selected_problems_and_geomean_only_solved_ones(tmp_path: Path) -> None:
    rows = [row(1, "a", "ok", 0.5, 0.25), row(1, "b", "ok", 3.0, 1.2),  # best of problem 1: 3.0x
            row(2, "a", "ok", 1.2, 0.9), row(3, "a", "incorrect"), row(4, "a", "rejected"),
            ResultRow(level=1, number=5, file="5_P.py", status="no_solution", reason="no_solution: -")]
    [s] = summarize(rows)
    assert (s.problems, s.solved, s.candidates) == (5, 2, 5)
    assert s.correct_pct == pytest.approx(60.0)
    assert s.fast_eager == {"fast_0": 40.0, "fast_1": 40.0, "fast_1.5": 20.0, "fast_2": 20.0}
    assert s.fast_compile == {"fast_0": 40.0, "fast_1": 20.0, "fast_1.5": 0.0, "fast_2": 0.0}
    assert s.geomean_speedup == pytest.approx(math.sqrt(3.0 * 1.2))
    assert s.outcomes == {"ok": 3, "incorrect": 1, "rejected": 1, "no_solution": 1}


def test_an_unsolved_problem_shows_the_candidate_that_got_furthest() -> None:
    [p] = problem_results([row(1, "a", "compile_error"), row(1, "b", "crashed"), row(1, "c", "incorrect")])
    assert (p.status, p.best_label, p.speedup) == ("incorrect", "c", None)


def test_reports_are_written_with_tables_and_plots(tmp_path: Path) -> None:
    s = store_with(tmp_path, [row(1, "a", "ok", 2.0), row(2, "a", "ok", 0.5), row(3, "a", "incorrect")])
    paths = write_reports(s)
    data = json.loads(paths["results.json"].read_text())
    assert data["levels"][0]["solved"] == 2 and len(data["problems"]) == 3 and len(data["evaluations"]) == 3
    md = paths["report.md"].read_text()
    assert "| 1 | 2/3 | 67% | 67 / 33 / 33 / 0 |" in md  # fast_p: strictly more than p times faster
    page = paths["report.html"].read_text()
    assert page.count("<svg") == 2 and "2.00x" in page and "incorrect" in page


def test_compare_matches_by_hash_across_renames_and_classifies_changes(tmp_path: Path) -> None:
    a = store_with(tmp_path, [row(1, "a", "ok", 2.0), row(2, "a", "ok", 1.0), row(3, "a", "incorrect"),
                              row(4, "a", "ok", 1.5)], "a")
    renamed = row(1, "a", "ok", 3.0).model_copy(update={"file": "1_Renamed.py", "number": 9})
    b = store_with(tmp_path, [renamed, row(2, "a", "ok", 1.01), row(3, "a", "ok", 1.1), row(4, "a", "crashed"),
                              row(5, "a", "ok", 1.0)], "b")
    got = {d.key: (d.change, None if d.ratio is None else round(d.ratio, 2)) for d in compare(a.root, b.root)}
    assert got == {"L1/1_P": ("improved", 1.5), "L1/2_P": ("same", 1.01), "L1/3_P": ("newly_solved", None),
                   "L1/4_P": ("lost", None), "L1/5_P": ("only_b", None)}


def test_compare_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(CompareError, match="not a bench run folder"):
        compare(tmp_path, tmp_path)
