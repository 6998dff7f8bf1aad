"""Suite loading and solution discovery on the project's mini-suite (KernelBench layout)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kevolve.kernelbench.solutions import discover
from kevolve.kernelbench.suite import SuiteError, load_suite, parse_numbers


@pytest.fixture
def suite(fixtures: Path) -> Path:
    return fixtures / "suite"


def test_parse_numbers_reads_ranges_and_singles() -> None:
    assert parse_numbers("1-3,7, 10-11") == {1, 2, 3, 7, 10, 11}


@pytest.mark.parametrize("spec", ["1-", "a", "5-2", "1,,2"])
def test_parse_numbers_rejects_malformed_specs(spec: str) -> None:
    with pytest.raises(SuiteError):
        parse_numbers(spec)


def test_levels_are_loaded_in_number_order_with_content_hash_ids(suite: Path) -> None:
    probs = load_suite(suite, [1, 2])
    assert [p.key for p in probs] == ["L1/1_ReLU", "L1/2_Sigmoid", "L1/3_Scale", "L1/4_Sum_reduction_over_a_dimension",
                                      "L1/5_Matmul_small", "L1/6_Tanh", "L2/1_Linear_ReLU", "L2/2_Add_Mul",
                                      "L2/3_Broken_forward"]
    assert all(p.problem is not None and len(p.problem.id) == 16 and p.problem.level == p.level for p in probs)
    assert len({p.problem.id for p in probs}) == len(probs)  # type: ignore[union-attr]


def test_selection_by_numbers_and_regex(suite: Path) -> None:
    assert [p.number for p in load_suite(suite, [1], problems="2-4")] == [2, 3, 4]
    assert [p.key for p in load_suite(suite, [1, 2], match="(?i)relu")] == ["L1/1_ReLU", "L2/1_Linear_ReLU"]
    assert load_suite(suite, [1], problems="40-50") == []


def test_a_renamed_problem_keeps_its_id(suite: Path, tmp_path: Path) -> None:
    (tmp_path / "level1").mkdir()
    shutil.copy(suite / "level1" / "1_ReLU.py", tmp_path / "level1" / "77_Renamed.py")
    original = load_suite(suite, [1], problems="1")[0]
    renamed = load_suite(tmp_path, [1])[0]
    assert renamed.number == 77 and renamed.problem.id == original.problem.id  # type: ignore[union-attr]


def test_kernelbench_checkout_layout_is_found(suite: Path, tmp_path: Path) -> None:
    shutil.copytree(suite / "level2", tmp_path / "KernelBench" / "level2")
    assert len(load_suite(tmp_path, [2])) == 3


def test_level4_hub_problem_is_unavailable_not_a_crash(suite: Path) -> None:
    [p] = load_suite(suite, [4])
    assert p.unavailable.startswith("unavailable:") and "Hugging Face" in p.unavailable


def test_unparsable_problem_gives_a_problem_error_entry(tmp_path: Path) -> None:
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "1_Bad.py").write_text("class Model(:\n")
    [p] = load_suite(tmp_path, [1])
    assert p.problem is None and p.unavailable.startswith("problem_error:") and "syntax error" in p.unavailable


@pytest.mark.parametrize(("kw", "msg"), [({"levels": [5]}, "--level"), ({"levels": [3]}, "no level3/"),
                                         ({"levels": [1], "match": "("}, "--match")])
def test_bad_selection_is_a_one_line_suite_error(suite: Path, kw: dict, msg: str) -> None:
    with pytest.raises(SuiteError, match=msg):
        load_suite(suite, **kw)


def test_solution_discovery_reads_both_layouts(fixtures: Path) -> None:
    found = discover(fixtures / "suite_solutions")
    labels = {k: [s.label for s in v] for k, v in found.items()}
    assert labels == {
        (1, 1): ["sample_0", "sample_1"], (1, 2): ["sample_0", "sample_1"], (1, 3): ["sample_0"],
        (1, 4): ["4_Sum_reduction_over_a_dimension"], (1, 5): ["naive"], (2, 1): ["1_Linear_ReLU"],
        (2, 2): ["2_Add_Mul", "sample_1"], (2, 3): ["sample_0"]}


def test_generated_sample_names_are_found_in_nested_run_folders(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "my_run"
    run.mkdir(parents=True)
    for s in (0, 10, 2):
        (run / f"level_3_problem_12_sample_{s}_kernel.py").write_text("x = 1\n")
    (run / "eval_results.json").write_text("{}")
    assert [s.label for s in discover(tmp_path)[(3, 12)]] == ["sample_0", "sample_2", "sample_10"]
