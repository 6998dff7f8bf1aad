"""The replay corpus and book on their own: matching a prompt's module to a corpus problem, the rotation,
replies kept verbatim or wrapped, and the leaderboard converter and fetch script on a repository in the
leaderboard's layout. (The endpoint driven by the real SDKs through `kevolve optimize` is in
tests/integration/test_replay_endpoint.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import FIXTURES

from kevolve.agent.extract import extract_code
from kevolve.agent.llm.replay import CorpusError, ReplayBook, ReplaySample, read_corpus, write_corpus
from kevolve.agent.prompting import render_prompt

PROBLEMS, SOL = FIXTURES / "problems", FIXTURES / "solutions"
ROOT = Path(__file__).parent.parent.parent


def prompt(problem: str, task: str = "translate") -> str:
    src = (PROBLEMS / problem).read_text().strip()
    if task == "translate":
        return render_prompt("translate", problem_source=src, device_notes="The CPU.", examples="")
    return render_prompt("repair", problem_source=src, device_notes="The CPU.", candidate_source="x = 1",
                         outcome="incorrect", failure="Reason: incorrect")


def sample(problem: str, solution: str, **kw: object) -> ReplaySample:
    return ReplaySample(problem=problem, problem_source=(PROBLEMS / problem).read_text(), model="m",
                        code=(SOL / solution).read_text(), **kw)  # type: ignore[arg-type]


def test_requests_get_their_problems_kernels_in_rotation_and_others_get_no_code(tmp_path) -> None:
    write_corpus(tmp_path, [sample("relu.py", "relu_slow.py"), sample("softmax.py", "softmax_cpp.py"),
                            sample("relu.py", "relu_cpp.py")])
    book = ReplayBook(read_corpus(tmp_path))
    got = [extract_code(book.answer(prompt("relu.py", t))).source for t in ("translate", "repair", "translate")]
    assert got == [(SOL / n).read_text().strip() + "\n" for n in ("relu_slow.py", "relu_cpp.py", "relu_slow.py")]
    assert [op for op, _, _ in book.served] == ["translate", "repair", "translate"]
    reply = book.answer(prompt("gelu_bias.py"))
    assert extract_code(reply).source is None and book.unmatched == 1 and len(book.served) == 3


def test_a_problem_whose_sizes_changed_matches_by_its_model_class(tmp_path) -> None:
    """KernelBench changed input sizes between releases: relu_big.py is relu.py's Model with other sizes."""
    book = ReplayBook([sample("relu_big.py", "relu_cpp.py")])
    assert extract_code(book.answer(prompt("relu.py"))).source == (SOL / "relu_cpp.py").read_text().strip() + "\n"
    assert ReplayBook([sample("softmax.py", "softmax_cpp.py")]).samples_for((PROBLEMS / "relu.py").read_text()) == []


def test_a_kept_reply_is_replayed_verbatim_and_code_is_wrapped_in_prose() -> None:
    messy = "Sure!\n\n````python\n" + (SOL / "relu_wrong.py").read_text() + "````\nHope this helps."
    book = ReplayBook([sample("relu.py", "relu_slow.py"), sample("relu.py", "relu_wrong.py", reply=messy)])
    first, second = book.answer(prompt("relu.py")), book.answer(prompt("relu.py"))
    assert second == messy
    assert first.count("```") >= 2 and not first.startswith("import") and "import torch" in first


def test_a_broken_corpus_is_one_line(tmp_path) -> None:
    with pytest.raises(CorpusError, match="no replay corpus"):
        read_corpus(tmp_path)
    (tmp_path / "corpus.jsonl").write_text('{"problem": "p"}\n')
    with pytest.raises(CorpusError, match=r"corpus.jsonl:1: not a replay sample"):
        read_corpus(tmp_path)


def leaderboard_repo(root: Path) -> Path:
    """A repository in the layout of github.com/anneouyang/KernelBenchLeaderboard (docs/assets/…): the keys
    and the 0-based problem_id are the real raw_data.json's."""
    assets = root / "docs" / "assets"
    (assets / "problems").mkdir(parents=True)
    (assets / "problems" / "l1_p19.py").write_text((PROBLEMS / "relu_big.py").read_text())
    (assets / "problems" / "l1_p23.py").write_text((PROBLEMS / "softmax.py").read_text())
    row = dict(torch_speedup=0.55, torch_compile_speedup=1.2, baseline_torch_time=0.011,
               baseline_torch_compile_time=0.025, kernel_eval_time=0.02, level=1)
    raw = [dict(row, problem_id=18, code=(SOL / "relu_cpp.py").read_text(), model="gpt-4o", display_name="gpt-4o",
                file="a1"),
           dict(row, problem_id=22, code=(SOL / "softmax_cpp.py").read_text(), model="deepseek",
                display_name="deepseek-coder", file="b2"),
           dict(row, problem_id=18, code=(SOL / "relu_slow.py").read_text(), model="deepseek",
                display_name="deepseek-coder", file="c3"),
           dict(row, level=3, problem_id=0, code="x", model="o1", display_name="gpt-o1", file="d4")]
    (assets / "raw_data.json").write_text(json.dumps(raw))
    (assets / "data.json").write_text(json.dumps({"Level 1: 19_ReLU": [{"display_name": "gpt-4o", "file": "a1"}],
                                                  "Level 1: 23_Softmax": []}))
    return root


def test_the_fetch_script_builds_a_corpus_the_book_serves(tmp_path) -> None:
    repo = leaderboard_repo(tmp_path / "leaderboard")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_replay_corpus.py"), "--source", str(repo),
                        "--out", str(tmp_path / "corpus"), "--levels", "1,2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "3 kernels for 2 problems from 2 models" in r.stdout
    samples = read_corpus(tmp_path / "corpus")
    assert [(s.problem, s.model) for s in samples] == [("level1/19_ReLU", "gpt-4o"), ("level1/23_Softmax", "deepseek-coder"),
                                                       ("level1/19_ReLU", "deepseek-coder")]
    book = ReplayBook(samples)
    assert "relu_ext" in (extract_code(book.answer(prompt("relu.py"))).source or "")


@pytest.mark.parametrize(("args", "needle"), [
    (["--source", "{missing}"], "no such folder"),
    (["--source", "{empty}"], "no docs/assets/raw_data.json"),
    (["--source", "{repo}", "--levels", "one"], "--levels must be numbers"),
    (["--source", "{repo}", "--levels", "4"], "no kernels for levels 4"),
])
def test_fetch_script_bad_input_is_one_line_exit_2(tmp_path, args: list[str], needle: str) -> None:
    repo = leaderboard_repo(tmp_path / "leaderboard")
    (tmp_path / "empty").mkdir()
    argv = [a.format(missing=tmp_path / "nope", empty=tmp_path / "empty", repo=repo) for a in args]
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_replay_corpus.py"), *argv,
                        "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 2 and needle in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr


def test_the_documented_corpus_format_is_the_one_the_writer_writes_and_the_book_serves(tmp_path) -> None:
    """docs/optimize.md documents corpus.jsonl for users who write their own (issue 37: 'the replay file format is
    only in the code'): its field table names every field of ReplaySample, and its example line is what
    write_corpus writes for that sample, read back and served to a prompt for its module."""
    import re

    doc = (ROOT / "docs" / "optimize.md").read_text().split("### The replay corpus format", 1)[1].split("\n## ", 1)[0]
    fields = re.findall(r"^\| `(\w+)` \|", doc, re.M)
    assert fields == list(ReplaySample.model_fields)
    example = re.search(r"```json\n(.*?)\n```", doc, re.S).group(1)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "corpus.jsonl").write_text(example + "\n")
    [s] = read_corpus(tmp_path / "mine")
    assert write_corpus(tmp_path / "again", [s]).read_text() == example + "\n"
    reply = ReplayBook([s]).answer(render_prompt("translate", problem_source=s.problem_source.strip(),
                                                 device_notes="The CPU.", examples=""))
    assert extract_code(reply).source == s.code
