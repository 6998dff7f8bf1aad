"""A problem the archive already holds a winner for (a part met in another model, a problem optimized before) starts
with that kernel: `optimize` looks the problem up by its source's hash (archive.known: ok, faster than eager, timed
on the same kind of device, fastest first) and evaluates it first, as an imported candidate judged again here; the
LLM then works from it. The archive is a real SQLite file written by the production writer (a first run's Ingestor);
the second run reads it the way the CLI does (`retriever="archive"` at a URL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ingest_run import PROBLEM, SCRIPT, TagSandbox, config, reply
from testpaths import FIXTURES

from kevolve import archive as archive_pkg
from kevolve.agent.config import StopConfig
from kevolve.agent.llm.scripted import ScriptedLLM
from kevolve.agent.run import run_optimize
from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.ingest import Ingestor
from kevolve.archive.store import Archive
from kevolve.contract import problem_from_source
from kevolve.parts.decompose import decompose
from kevolve.records import Evaluation


class CpuTagSandbox(TagSandbox):
    """TagSandbox's verdicts, named for the CPU as the real judge names it ("cpu (…)")."""

    def evaluate(self, problem, candidate, config) -> Evaluation:  # noqa: ANN001
        return super().evaluate(problem, candidate, config).model_copy(update={"device": "cpu (x86_64)"})


@pytest.fixture()
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Archive]:
    """An archive holding a first run's every verdict on PROBLEM (its best ok at 3.5x); opened at its URL with the
    hashing embedder, as `open_archive(url)` hands it to the second run."""
    url = f"sqlite:///{tmp_path / 'archive.db'}"
    archive = Archive(url, embedder=HashingEmbedder())
    monkeypatch.setitem(archive_pkg._opened, url, archive)
    first = run_optimize(PROBLEM, config(tmp_path / "first"), llm=ScriptedLLM(SCRIPT), sandbox=CpuTagSandbox(),
                         retriever=None, storer=Ingestor(archive, "all", run_kind="optimize"))
    assert first.speedup == pytest.approx(3.5)
    slow = config(tmp_path / "slow").model_copy(update={"stop": StopConfig(max_candidates=1, patience=20)})
    run_optimize(PROBLEM, slow, llm=ScriptedLLM([("Task: translate", [reply("ok_0_9")])]), sandbox=CpuTagSandbox(),
                 retriever=None, storer=Ingestor(archive, "all", run_kind="optimize"))  # correct, slower than eager
    return url, archive


def test_known_gives_this_problems_winners_on_the_same_kind_of_device_fastest_first(
        stored: tuple[str, Archive]) -> None:
    url, archive = stored
    got = archive_pkg.known(PROBLEM.id, cuda=False, k=3, db_url=url)
    assert [round(k.speedup or 0, 2) for k in got] == [3.5, 3.0, 2.5] and all("VARIANT" in (k.source or "") for k in got)
    assert archive_pkg.known(PROBLEM.id, cuda=True, k=3, db_url=url) == []  # timed on a CPU: nothing for a GPU run
    assert archive_pkg.known("0" * 16, cuda=False, db_url=url) == []  # another problem: nothing
    slow = [k for k in archive.kernels(with_source=True)[0] if (k.speedup or 0) <= 1.0]  # ok, 0.9x
    assert slow and not {k.id for k in slow} & {k.id for k in archive_pkg.known(PROBLEM.id, False, 50, db_url=url)}


def test_a_run_on_a_problem_the_archive_holds_starts_from_its_winner(tmp_path: Path,
                                                                     stored: tuple[str, Archive]) -> None:
    url, _ = stored
    llm = ScriptedLLM([("Task: translate", [reply("wrong")] * 3), ("Task: repair", [reply("cerr")] * 3),
                       ("Task: mutate", [reply("ok_1_1")] * 3)])
    cfg = config(tmp_path / "second").model_copy(update={"stop": StopConfig(max_candidates=2, patience=20)})
    second = run_optimize(PROBLEM, cfg, llm=llm, sandbox=CpuTagSandbox(), retriever="archive", storer=None,
                          archive_url=url)
    trials = [json.loads(x) for x in (second.run_dir / "trials.jsonl").read_text().splitlines()]
    first = next(t for t in trials if t["status"] == "evaluated")
    cand = json.loads((second.run_dir / "candidates" / f"{first['candidate']}.json").read_text())["candidate"]
    assert cand["origin"] == "imported" and cand["proposer"] == "archive" and "ok_3_5" in cand["source"]
    assert first["outcome"] == "ok" and second.speedup == pytest.approx(3.5)  # judged again here, and kept
    assert second.best_candidate_id == first["candidate"]


def test_a_run_without_the_archive_reuses_nothing(tmp_path: Path, stored: tuple[str, Archive]) -> None:
    url, _ = stored
    cfg = config(tmp_path / "off").model_copy(update={"archive": False,
                                                      "stop": StopConfig(max_candidates=1, patience=20)})
    off = run_optimize(PROBLEM, cfg, llm=ScriptedLLM([("Task: translate", [reply("ok_1_1")])]),
                       sandbox=CpuTagSandbox(), retriever="archive", storer=None, archive_url=url)
    assert off.speedup == pytest.approx(1.1)


def test_a_part_is_the_same_problem_in_another_model() -> None:
    """The archive keys a part by its problem's source: the same block at the same shapes in a different model is the
    same problem (so its winner is reused), a part that differs is not."""
    src = (FIXTURES / "problems" / "small_resnet.py").read_text()
    a = problem_from_source(src, "small_resnet.py")
    b = problem_from_source(src.replace("return [64, 100]", "return [64, 7]"), "other_resnet.py")  # 7 classes
    pa, pb = decompose(a), decompose(b)
    by = {p.spelled: p.problem.id for p in pa.parts}
    shared = [p for p in pb.parts if by.get(p.spelled) == p.problem.id]
    differ = [p for p in pb.parts if p.spelled not in by]
    assert a.id != b.id and shared and differ, ([p.spelled for p in pa.parts], [p.spelled for p in pb.parts])


def test_a_whole_models_composition_is_archived_and_starts_the_next_run_of_that_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`optimize --parts` offers each composition's verdict to the archive as the whole model's kernel (as a loop
    offers its candidates): a later `optimize` of the same model, without --parts, starts from it."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "unit"))
    from test_parts_run import MARKERS, MODEL, PartsSandbox, distinct, parts_config, split

    from kevolve.agent.parts import run_parts

    class CpuParts(PartsSandbox):
        def evaluate(self, problem, candidate, config) -> Evaluation:  # noqa: ANN001
            return super().evaluate(problem, candidate, config).model_copy(update={"device": "cpu (x86_64)"})

    url = f"sqlite:///{tmp_path / 'archive.db'}"
    monkeypatch.setitem(archive_pkg._opened, url, Archive(url, embedder=HashingEmbedder()))
    cfg = parts_config(tmp_path / "parts", max_candidates=3).model_copy(update={"archive": True})
    whole = run_parts(MODEL, cfg, llm=ScriptedLLM([(m, distinct("fast")) for m in MARKERS.values()]),
                      sandbox=CpuParts(), split=split(), archive_url=url)
    assert whole.best_candidate_id is not None and whole.speedup == pytest.approx(2.0)
    got = archive_pkg.known(MODEL.id, cuda=False, db_url=url)
    assert [k.id for k in got] == [whole.best_candidate_id] and got[0].origin == "composed"
    again = run_optimize(MODEL, cfg.model_copy(update={"runs_dir": tmp_path / "again", "stop": StopConfig(
        max_candidates=1, patience=20)}), llm=ScriptedLLM([("Task: translate", [reply("wrong")])]),
        sandbox=CpuParts(), retriever="archive", storer=None, archive_url=url)
    first = json.loads((again.run_dir / "trials.jsonl").read_text().splitlines()[0])
    assert first["candidate"] == whole.best_candidate_id and again.best_candidate_id == whole.best_candidate_id
