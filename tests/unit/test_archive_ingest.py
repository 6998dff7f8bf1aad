"""The ingest switch on a real SQLite archive: everything, winners only (ok and improving), or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.ingest import IngestMode, Ingestor, parse_mode
from kevolve.archive.records import KernelFilter
from kevolve.archive.store import Archive
from kevolve.archive.synthetic import OPS, kernel_source, problem_source
from kevolve.records import Candidate, Evaluation, Outcome, Problem, TimingStats

RELU = Problem.from_source(problem_source("ReLU", OPS["ReLU"]), "relu.py", "19_ReLU", level=1)
SOFTMAX = Problem.from_source(problem_source("Softmax", OPS["Softmax"]), "softmax.py", "23_Softmax", level=1)


@pytest.fixture
def arch(tmp_path: Path) -> Archive:
    a = Archive(f"sqlite:///{tmp_path / 'a.db'}", embedder=HashingEmbedder())
    yield a
    a.close()


def _t(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, trials=5, method="test")


def verdict(p: Problem, variant: int, outcome: Outcome, speedup: float | None = None) -> tuple[Candidate, Evaluation]:
    c = Candidate.from_source(kernel_source(p.name, ["tiling"], variant), p.id)
    ev = Evaluation(candidate_id=c.id, problem_id=p.id, outcome=outcome, reason=outcome.value, ref_timing=_t(1.0),
                    timing=_t(1.0 / speedup) if speedup else None)
    return c, ev


# (outcome, speedup) in the order the evaluations return
SEQUENCE = [(Outcome.COMPILE_ERROR, None), (Outcome.OK, 1.5), (Outcome.INCORRECT, None), (Outcome.OK, 1.2),
            (Outcome.OK, 2.0), (Outcome.OK, 2.0), (Outcome.INFRA_ERROR, None), (Outcome.REJECTED, None),
            (Outcome.OK, 3.0)]


def offer_all(ing: Ingestor, p: Problem = RELU, run: str = "run-1", seq: list = SEQUENCE,
              start: int = 0) -> list[str]:
    """Offer one verdict per (outcome, speedup) of `seq`, each a new candidate; the results in order."""
    return [ing.offer(p, *verdict(p, start + i, o, s), run).result for i, (o, s) in enumerate(seq)]


def stored_speedups(arch: Archive, p: Problem = RELU) -> list[float | None]:
    """Speedups of a problem's stored kernels, oldest first."""
    newest_first, _ = arch.kernels(KernelFilter(outcome=None, problem_id=p.id), sort="created", limit=100)
    return [k.speedup for k in reversed(newest_first)]


def test_all_stores_every_verdict_but_infra_errors(arch: Archive) -> None:
    results = offer_all(Ingestor(arch, IngestMode.ALL, "optimize"))
    assert results.count("stored") == len(SEQUENCE) - 1 and results[6] == "skipped"
    s = arch.stats()
    assert s.kernels == s.evaluations == 8 and s.runs == 1
    assert set(s.by_outcome) == {"ok", "compile_error", "incorrect", "rejected"}


def test_winners_stores_only_ok_candidates_faster_than_all_stored_before(arch: Archive) -> None:
    ing = Ingestor(arch, IngestMode.WINNERS, "optimize")
    results = offer_all(ing)
    assert results == ["skipped", "stored", "skipped", "skipped", "stored", "skipped", "skipped", "skipped", "stored"]
    assert stored_speedups(arch) == pytest.approx([1.5, 2.0, 3.0])
    # another problem of the same run starts its own chain
    assert ing.offer(SOFTMAX, *verdict(SOFTMAX, 1, Outcome.OK, 0.5), "run-1").result == "stored"


def test_winners_chain_continues_after_a_restart_and_is_per_run(arch: Archive) -> None:
    offer_all(Ingestor(arch, IngestMode.WINNERS), seq=SEQUENCE[:5])  # stores 1.5x and 2.0x, then "crashes"
    again = Ingestor(arch, IngestMode.WINNERS)  # a resumed run: a fresh ingestor, the same run id
    assert offer_all(again, seq=[(Outcome.OK, 1.8), (Outcome.OK, 2.5)], start=20) == ["skipped", "stored"]
    # a different run begins its own chain, even below this run's best
    assert offer_all(again, run="run-2", seq=[(Outcome.OK, 1.1)], start=30) == ["stored"]
    assert stored_speedups(arch) == pytest.approx([1.5, 2.0, 2.5, 1.1])


def test_re_offering_a_stored_verdict_adds_nothing(arch: Archive) -> None:
    ing = Ingestor(arch, IngestMode.ALL)
    c, ev = verdict(RELU, 1, Outcome.OK, 2.0)
    assert [ing.offer(RELU, c, ev, "r").result for _ in range(2)] == ["stored", "stored"]
    s = arch.stats()
    assert (s.kernels, s.evaluations) == (1, 1)


def test_none_stores_nothing_and_modes_parse(arch: Archive) -> None:
    assert set(offer_all(Ingestor(arch, IngestMode.NONE))) == {"skipped"} and arch.stats().kernels == 0
    assert parse_mode(" Winners") is IngestMode.WINNERS
    with pytest.raises(ValueError, match="winners, all or none"):
        parse_mode("best")


def test_a_failing_database_is_reported_not_raised(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gone' / 'a.db'}"
    arch = Archive(url, embedder=HashingEmbedder())
    arch.engine.dispose()
    (tmp_path / "gone" / "a.db").unlink()
    (tmp_path / "gone" / "a.db").mkdir()  # the file is now a folder: every write fails
    for mode in (IngestMode.ALL, IngestMode.WINNERS):
        done = Ingestor(arch, mode).offer(RELU, *verdict(RELU, 1, Outcome.OK, 2.0), "r")
        assert done.result == "failed" and done.reason and "\n" not in done.reason


@pytest.mark.parametrize("mode", [IngestMode.ALL, IngestMode.WINNERS])
def test_an_audited_verdict_binds_its_kernels_best(arch: Archive, mode: IngestMode) -> None:
    """optimize audits its winner after the search and hands the audited verdict to the archive (agent/run.py
    audit_best): the audit's lower speed, or its overturn, replaces the speed the evaluation stored, and a later
    unaudited evaluation of the same kernel cannot raise it again. Audited verdicts come from the audit's own
    rule (sandbox/judge/audit.py `decide`)."""
    from kevolve.sandbox.judge.audit import decide

    ing = Ingestor(arch, mode, "optimize")
    c, ev = verdict(RELU, 0, Outcome.OK, 3.0)
    assert ing.offer(RELU, c, ev, "run-1").result == "stored"
    assert stored_speedups(arch) == [pytest.approx(3.0)]
    slower = ev.model_copy(update={"timing": _t(1.0 / 2.4)})  # a fresh process reads 2.4x: within the noise
    lowered = decide(ev, slower, None, (1,), 1.0)
    assert lowered.ok and lowered.speedup == pytest.approx(2.4)
    assert ing.offer(RELU, c, lowered, "run-1").result == "stored"
    assert stored_speedups(arch) == [pytest.approx(2.4)]
    again = ev.model_copy(update={"timing": _t(1.0 / 3.5)})  # evaluated again later, unaudited, faster
    ing.offer(RELU, c, again, "run-2")
    assert stored_speedups(arch) == [pytest.approx(2.4)]
    # another kernel, overturned by its audit: its best is no longer ok
    c2, ev2 = verdict(RELU, 1, Outcome.OK, 5.0)
    ing.offer(RELU, c2, ev2, "run-1")
    overturned = decide(ev2, ev2.model_copy(update={"timing": _t(1.0)}), None, (1,), 1.0)
    assert overturned.outcome is Outcome.REJECTED
    assert ing.offer(RELU, c2, overturned, "run-1").result == "stored"
    ok_now, _ = arch.kernels(KernelFilter(problem_id=RELU.id), sort="speedup", limit=10)
    assert [k.id for k in ok_now] == [c.id]
    assert arch.get(c2.id).kernel.outcome == Outcome.REJECTED.value


def test_an_unaudited_kernel_keeps_the_best_of_its_evaluations(arch: Archive) -> None:
    ing = Ingestor(arch, IngestMode.ALL, "optimize")
    c, ev = verdict(RELU, 0, Outcome.OK, 2.0)
    ing.offer(RELU, c, ev, "run-1")
    ing.offer(RELU, c, ev.model_copy(update={"timing": _t(1.0 / 3.0)}), "run-2")
    ing.offer(RELU, c, ev.model_copy(update={"timing": _t(1.0 / 1.5)}), "run-3")
    assert stored_speedups(arch) == [pytest.approx(3.0)]
