"""`optimize --parts` as a whole run (agent/parts.py): the budgets are the whole run's, spread over the parts' loops;
a run stopped part way goes on with `--parts --resume`; a composition judged not ok is tried again with a part fewer.

The real loop and the real split of the small ResNet (8 channels) into its stem, its blocks and its head, with a
scripted LLM and a fake sandbox (the interface of test_graph_fake_sandbox's): a part candidate is judged by its
'variant' tag, a composition of them is incorrect where it holds a 'breaks' part."""

from __future__ import annotations

import json
import re

import pytest
from test_graph_fake_sandbox import config, reply, timing
from test_parts import tiny_resnet

from kevolve.agent.config import EvolutionConfig, StopConfig
from kevolve.agent.llm.base import NonRetryableLLMError
from kevolve.agent.llm.scripted import ScriptedLLM
from kevolve.agent.parts import run_parts
from kevolve.agent.run import OptimizeError, UsageError, run_optimize
from kevolve.contract import problem_from_source
from kevolve.parts.decompose import decompose
from kevolve.records import Evaluation, Origin, Outcome

MODEL = problem_from_source(tiny_resnet(), "tiny_resnet.py")
SHARES = (0.2, 0.65, 0.03)  # the stem's, the blocks' and the head's share of eager's time, as decompose measures them


def split(shares: tuple[float | None, ...] = SHARES):  # noqa: ANN201 - a Decomposition
    """The small ResNet in parts (decompose), at fixed shares: a measurement on a busy machine varies."""
    dec = decompose(MODEL)
    return dec.model_copy(update={"parts": tuple(p.model_copy(update={"share": s}) for p, s in zip(dec.parts, shares))})
# what only each part's problem holds: its constructor call
MARKERS = {1: "torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)", 2: "Block(8)", 3: "torch.nn.Linear(8, 10)"}


class PartsSandbox:
    """A part candidate: ok at 0.25 ms ('fast') or 0.5 ms ('breaks', correct alone) against eager's 1 ms; a
    composition: incorrect where it holds a 'breaks' part, else ok at 0.5 ms. Every evaluation holds the device
    `wall_s` seconds."""

    def __init__(self, wall_s: float = 1.0) -> None:
        self.wall_s = wall_s
        self.composed: list[str] = []
        self.parts = 0

    def evaluate(self, problem, candidate, config) -> Evaluation:  # noqa: ANN001
        base = dict(candidate_id=candidate.id, problem_id=problem.id, ref_timing=timing(1.0), wall_s=self.wall_s)
        tags = re.findall(r"VARIANT = '(\w+)'", candidate.source)
        if candidate.origin is Origin.COMPOSED:
            self.composed.append(candidate.source)
            if "breaks" in tags:
                return Evaluation(outcome=Outcome.INCORRECT, reason="incorrect: output 0: max error 3.0e+00", **base)
            return Evaluation(outcome=Outcome.OK, reason="ok", timing=timing(0.5), **base)
        self.parts += 1
        return Evaluation(outcome=Outcome.OK, reason="ok", timing=timing(0.25 if tags[0] == "fast" else 0.5), **base)


class Flaky(ScriptedLLM):
    """Scripted, but a prompt holding `fail_on` gets a permanent error (a revoked key) while `fail_on` is set."""

    fail_on: str | None = None

    def complete(self, messages, **opts):  # noqa: ANN001, ANN003, ANN201
        if self.fail_on and self.fail_on in messages[-1].content:
            raise NonRetryableLLMError("401: invalid api key")
        return super().complete(messages, **opts)


def distinct(tag: str, n: int = 30) -> list[str]:
    return [reply(tag, f"v{i}") for i in range(n)]


def parts_config(tmp_path, **stop: object):  # noqa: ANN201
    return config(tmp_path).model_copy(update={"evolution": EvolutionConfig(islands=1, jobs_per_generation=1, seed=7),
                                               "stop": StopConfig(**{"patience": 20, **stop})})


def calls_for(llm: ScriptedLLM, part: int) -> int:
    return sum(MARKERS[part] in c[-1].content for c in llm.calls)


def run(tmp_path, llm, sandbox=None, **stop):  # noqa: ANN001, ANN003, ANN201
    return run_parts(MODEL, parts_config(tmp_path, **stop), llm=llm, sandbox=sandbox or PartsSandbox(), split=split())


def test_the_candidate_budget_is_the_whole_runs_spread_by_share(tmp_path) -> None:
    llm = ScriptedLLM([(m, distinct("fast")) for m in MARKERS.values()])
    r = run(tmp_path, llm, max_candidates=7)
    # before: 7 for each part's loop, 21 in all; now 7 in all, largest share first: the blocks' 65/88 of 7 with one
    # kept for each of the others (5), the stem 20/23 of the 2 left with one kept for the head (1), the head the last
    assert r.proposals == len(llm.calls) == 7
    assert [calls_for(llm, i) for i in (1, 2, 3)] == [1, 5, 1]
    own = {p.index: json.loads((r.run_dir / "parts" / p.run_id / "config.json").read_text()) for p in r.parts}
    assert [own[i]["stop"]["max_candidates"] for i in (1, 2, 3)] == [1, 5, 1]


def test_parts_without_measured_shares_split_the_budget_equally(tmp_path) -> None:
    llm = ScriptedLLM([(m, distinct("fast")) for m in MARKERS.values()])
    r = run_parts(MODEL, parts_config(tmp_path, max_candidates=6), llm=llm, sandbox=PartsSandbox(),
                  split=split((None, None, None)))
    assert [calls_for(llm, i) for i in (1, 2, 3)] == [2, 2, 2] and r.proposals == 6


def test_a_budget_smaller_than_the_parts_funds_the_largest_shares(tmp_path) -> None:
    llm = ScriptedLLM([(m, distinct("fast")) for m in MARKERS.values()])
    r = run(tmp_path, llm, max_candidates=1)
    assert len(llm.calls) == 1 and calls_for(llm, 2) == 1  # the blocks: most of eager's time
    assert [p.index for p in r.parts if p.run_id] == [2] and r.answer.value == "improved"
    assert {p.index: p.note for p in r.parts if not p.run_id} == dict.fromkeys(
        (1, 3), "the run's budget pays a candidate for 1 of the 3 parts: those with the largest shares")


class Priced(ScriptedLLM):
    """A scripted LLM without a price whose every reply costs $0.10 (a local server's bill, learned per call)."""

    def complete(self, messages, **opts):  # noqa: ANN001, ANN003, ANN201
        return super().complete(messages, **opts).model_copy(update={"cost_usd": 0.1})


def test_the_dollar_budget_is_the_whole_runs(tmp_path) -> None:
    llm = Priced([(m, distinct("fast")) for m in MARKERS.values()])
    r = run(tmp_path, llm, budget_usd=0.75)
    assert r.cost_usd == pytest.approx(0.7) and [calls_for(llm, i) for i in (1, 2, 3)] == [1, 5, 1]
    r = run(tmp_path, llm, budget_usd=0.25)  # $0.10 for the stem leaves $0.15: the blocks' one call, none for the head
    assert r.cost_usd <= 0.25 and {p.index: p.note for p in r.parts if not p.run_id} == {
        3: "the run's budget was spent by the parts before it"}


def test_the_device_budget_is_the_whole_runs_the_composition_kept_for(tmp_path) -> None:
    box = PartsSandbox(wall_s=30.0)
    r = run(tmp_path, ScriptedLLM([(m, distinct("fast")) for m in MARKERS.values()]), box, budget_device_s=600.0)
    # 120 s kept for the composition; of 480 s the blocks get 480 less 120 for each other part (7 evaluations of 30
    # s, one kept back as a loop does for an audit), the stem 150 of the 270 s left (4), the head the 150 s left (4)
    assert box.parts == 15 and len(box.composed) == 1 and r.answer.value == "improved"
    assert r.device_s == pytest.approx(30.0 * 16) and r.device_s <= 600.0


def test_a_composition_not_ok_is_judged_again_without_the_part_of_least_gain(tmp_path) -> None:
    # the head's candidate is correct alone (2x) but breaks the whole: 3% x (1 - 1/2), the least gain
    llm = ScriptedLLM([(MARKERS[3], [reply("breaks")]), (MARKERS[1], [reply("fast")]), (MARKERS[2], [reply("fast")])])
    r = run(tmp_path, llm, max_candidates=3)
    assert [(t.parts, t.outcome) for t in r.compositions] == [((1, 2, 3), "incorrect"), ((1, 2), "ok")]
    assert r.answer.value == "improved" and r.best_candidate_id == r.compositions[1].candidate_id
    parts = {p.index: p for p in r.parts}
    assert parts[3].dropped.startswith("the composition of parts 1, 2, 3 was incorrect (incorrect: output 0")
    assert "least gain (+1.5% of eager's time)" in parts[3].dropped and parts[3].candidate_id is None
    assert parts[1].candidate_id and parts[2].candidate_id and not parts[1].dropped
    for t in r.compositions:  # each verdict is in the run folder, as the first's
        saved = json.loads((r.run_dir / "candidates" / f"{t.candidate_id}.json").read_text())
        assert saved["evaluation"]["outcome"] == t.outcome
    report = (r.run_dir / "report.md").read_text()
    assert "## Compositions judged" in report and "- Part 3 (head) dropped: the composition of parts 1, 2, 3" in report
    assert "| 3 | head | `torch.nn.Linear(8, 10)` | 3.0% | PyTorch (dropped from the composition) |" in report
    saved = json.loads((r.run_dir / "result.json").read_text())
    assert [c["parts"] for c in saved["compositions"]] == [[1, 2, 3], [1, 2]] and saved["parts"][2]["dropped"]


def test_parts_are_dropped_least_gain_first_until_none_is_left(tmp_path) -> None:
    llm = ScriptedLLM([(MARKERS[2], [reply("breaks")]), (MARKERS[1], [reply("fast")]), (MARKERS[3], [reply("fast")])])
    r = run(tmp_path, llm, max_candidates=3)
    # gains: head 3% x 3/4, stem 20% x 3/4, blocks 65% x 1/2
    assert [t.parts for t in r.compositions] == [(1, 2, 3), (1, 2), (2,)]
    assert {t.outcome for t in r.compositions} == {"incorrect"} and r.answer.value == "none_correct"
    assert r.stop_reason.startswith("no composition was ok: incorrect") and r.best_path is None
    assert all(p.dropped for p in r.parts)


def test_no_smaller_composition_is_judged_when_the_device_budget_is_spent(tmp_path) -> None:
    llm = ScriptedLLM([(MARKERS[2], [reply("breaks")]), (MARKERS[1], [reply("fast")]), (MARKERS[3], [reply("fast")])])
    box = PartsSandbox(wall_s=100.0)  # 120 s kept back: 250 s pay two parts' loops; 370 - 200 - 100 < another 100
    r = run(tmp_path, llm, box, budget_device_s=370.0)
    assert [p.index for p in r.parts if p.run_id] == [1, 2] and len(r.compositions) == 1
    assert r.answer.value == "none_correct" and r.device_s == pytest.approx(300.0)
    assert "the device budget left (70 s) pays for no smaller composition" in r.stop_reason


def test_a_parts_run_stopped_in_a_part_goes_on_where_it_stopped(tmp_path) -> None:
    llm = Flaky([(m, distinct("fast")) for m in MARKERS.values()])
    llm.fail_on = MARKERS[1]  # the parts run largest share first: the blocks, then the stem, then the head
    with pytest.raises(OptimizeError, match=r"^part 1: .*invalid api key.*--parts --resume"):
        run(tmp_path, llm, max_candidates=6)
    (folder,) = [p for p in tmp_path.iterdir() if (p / "parts.json").is_file()]
    journal = json.loads((folder / "part_runs.json").read_text())["runs"]
    assert [(j["index"], j["ended"]) for j in journal] == [(1, False), (2, True)]
    assert calls_for(llm, 2) == 4 and not (folder / "result.json").exists()
    llm.fail_on = None
    box = PartsSandbox()
    r = run_parts(None, parts_config(tmp_path), llm=llm, sandbox=box, resume=folder.name)
    assert r.run_id == folder.name and calls_for(llm, 2) == 4  # the blocks' loop had ended: kept, not prompted
    parts = {p.index: p for p in r.parts}
    assert (parts[1].run_id, parts[2].run_id) == (journal[0]["run_id"], journal[1]["run_id"])  # the same folders
    # the stem's loop goes on with the one candidate it was given (its failed call was none); the head gets the last
    assert [calls_for(llm, i) for i in (1, 3)] == [1, 1] and r.proposals == 6
    assert box.parts == 2 and len(box.composed) == 1 and r.answer.value == "improved"
    calls = len(llm.calls)
    again = run_parts(None, parts_config(tmp_path), llm=llm, sandbox=box, resume=str(folder))
    assert len(llm.calls) == calls and len(box.composed) == 2  # every loop had ended: only judged again
    assert again.best_candidate_id == r.best_candidate_id


def test_a_resume_with_the_wrong_kind_of_run_is_one_line(tmp_path) -> None:
    llm = ScriptedLLM([(m, [reply("fast")]) for m in MARKERS.values()])
    parts = run(tmp_path, llm, max_candidates=2)
    whole = run_optimize(MODEL, parts_config(tmp_path, max_candidates=1), llm=llm, sandbox=PartsSandbox())
    with pytest.raises(UsageError, match=f"run {parts.run_id} is an optimize --parts run: resume it with --parts$"):
        run_optimize(None, parts_config(tmp_path), llm=llm, sandbox=PartsSandbox(), resume=parts.run_id)
    with pytest.raises(UsageError, match=f"run {whole.run_id} is not an optimize --parts run: resume it without"):
        run_parts(None, parts_config(tmp_path), llm=llm, sandbox=PartsSandbox(), resume=whole.run_id)
    (parts.run_dir / "part_runs.json").write_text("{\"runs\": 3")  # cut short
    with pytest.raises(UsageError, match=f"^run {parts.run_id}: part_runs.json cannot be read .*not a --parts run "):
        run_parts(None, parts_config(tmp_path), llm=llm, sandbox=PartsSandbox(), resume=parts.run_id)
    part_run = parts.run_dir / "parts" / next(p.run_id for p in parts.parts if p.run_id)
    assert run_optimize(None, parts_config(tmp_path), llm=llm, sandbox=PartsSandbox(),
                        resume=str(part_run)).run_id == part_run.name  # a part's own run resumes alone, as before


@pytest.mark.parametrize("parts", [True, False], ids=["parts-run-without-parts", "whole-run-with-parts"])
def test_the_cli_resuming_the_wrong_kind_of_run_is_one_line_and_exit_2(parts: bool, tmp_path) -> None:
    from typer.testing import CliRunner

    from kevolve.cli import app

    llm = ScriptedLLM([(m, [reply("fast")]) for m in MARKERS.values()])
    made = (run(tmp_path, llm, max_candidates=2) if parts else
            run_optimize(MODEL, parts_config(tmp_path, max_candidates=1), llm=llm, sandbox=PartsSandbox()))
    r = CliRunner().invoke(app, ["optimize", "--resume", made.run_id, *([] if parts else ["--parts"]), "--llm",
                                 "vllm:m", "--device", "cpu", "--no-archive", "--runs-dir", str(tmp_path)])
    assert r.exit_code == 2 and r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert ("is an optimize --parts run: resume it with --parts" if parts else
            "is not an optimize --parts run: resume it without --parts") in r.stderr


def test_the_run_shows_its_parts_as_it_starts_and_each_parts_outcome_as_its_loop_ends(tmp_path, caplog) -> None:  # noqa: ANN001
    import logging

    llm = ScriptedLLM([(m, distinct("fast")) for m in MARKERS.values()])
    with caplog.at_level(logging.INFO, logger="kevolve.agent"):
        r = run(tmp_path, llm, max_candidates=3)
    text = caplog.text
    table = text[text.index("tiny_resnet in 3 parts"):]
    assert table.index("Block(8)") < table.index("torch.nn.Sequential(") < table.index("torch.nn.Linear(8, 10)")
    done = re.findall(r"part (\d) \(([^)]*)\): (\w+) at ([\d.]+)x its eager", text)
    assert sorted((int(i), where) for i, where, *_ in done) == [(1, "stem"), (2, "blocks.0, blocks.1"), (3, "head")]
    assert {cid for *_, cid, _x in done} == {p.candidate_id for p in r.parts}


class Untagged(PartsSandbox):
    """PartsSandbox, where a candidate without a tag (the offline proposer's) is a fast one."""

    def evaluate(self, problem, candidate, config) -> Evaluation:  # noqa: ANN001
        if "VARIANT = '" not in candidate.source:
            candidate = candidate.model_copy(update={"source": candidate.source + "\nVARIANT = 'fast'\n"})
        return super().evaluate(problem, candidate, config)


def test_a_part_the_offline_proposer_has_nothing_for_stays_pytorch_and_the_run_goes_on(tmp_path) -> None:
    # on the H200, 1_MLP's first part (a Linear alone: the library's GEMM, nothing to fuse) stopped the whole run
    cfg = parts_config(tmp_path, max_candidates=4).model_copy(update={"llm": None, "offline": True})
    r = run_parts(MODEL, cfg, sandbox=Untagged(), split=split())
    notes = {p.index: p.note for p in r.parts}
    assert notes[3].startswith("no candidate from the offline proposer (nothing_to_fuse: only library")
    assert r.parts[2].run_id is None and all(p.run_id for p in r.parts[:2])
    # the budget is spread over the two parts it has candidates for: the head takes no share of it
    own = {p.index: json.loads((r.run_dir / "parts" / p.run_id / "config.json").read_text()) for p in r.parts[:2]}
    assert sum(own[i]["stop"]["max_candidates"] for i in (1, 2)) == 4
    assert r.stop_reason.startswith("composition") and r.answer.value == "improved"


class Slow(PartsSandbox):
    """PartsSandbox whose every evaluation takes `sleep_s` of wall time."""

    def __init__(self, sleep_s: float) -> None:
        super().__init__(wall_s=sleep_s)
        self.sleep_s = sleep_s

    def evaluate(self, problem, candidate, config) -> Evaluation:  # noqa: ANN001
        import time

        time.sleep(self.sleep_s)
        return super().evaluate(problem, candidate, config)


def test_the_time_limit_is_the_whole_runs_with_the_split_and_the_composition_inside_it(tmp_path) -> None:
    # on the H200, LeNet-5 with --time-limit 75 ran 105 s by its own clock (its one part's loop took the whole limit,
    # the composition's evaluation came after) and 153 s of wall: the split and the composition now count in it
    import time

    llm = ScriptedLLM([(m, distinct("fast", 200)) for m in MARKERS.values()])
    t = time.monotonic()
    r = run_parts(MODEL, parts_config(tmp_path, max_candidates=200, time_limit_s=4.0), llm=llm, sandbox=Slow(0.25),
                  split=split())
    wall = time.monotonic() - t
    own = [json.loads((r.run_dir / "parts" / p.run_id / "config.json").read_text())["stop"]["time_limit_s"]
           for p in r.parts if p.run_id]
    assert sum(own) <= 0.8 * 4.0 + 1e-6  # a fifth kept back for the composition
    assert [t.outcome for t in r.compositions] == ["ok"] and r.answer.value == "improved"
    assert r.elapsed_s <= wall and wall < 4.0 + 1.0  # within the limit but for the evaluation in flight


def test_a_resumed_parts_run_goes_on_with_the_time_its_ended_loops_left(tmp_path) -> None:
    # a resumed --parts run had started its time limit again from nothing
    llm = Flaky([(m, distinct("fast", 200)) for m in MARKERS.values()])
    llm.fail_on = MARKERS[1]  # the blocks' loop ends (its share of the time), then the stem's fails
    cfg = parts_config(tmp_path, max_candidates=200, time_limit_s=6.0)
    with pytest.raises(OptimizeError):
        run_parts(MODEL, cfg, llm=llm, sandbox=Slow(0.25), split=split())
    (folder,) = [p for p in tmp_path.iterdir() if (p / "parts.json").is_file()]
    journal = {j["index"]: j for j in json.loads((folder / "part_runs.json").read_text())["runs"]}
    took = json.loads((folder / "parts" / journal[2]["run_id"] / "result.json").read_text())["elapsed_s"]
    assert took > 1.0
    llm.fail_on = None
    r = run_parts(None, parts_config(tmp_path), llm=llm, sandbox=Slow(0.25), resume=folder.name)
    own = {p.index: json.loads((r.run_dir / "parts" / p.run_id / "config.json").read_text())["stop"]["time_limit_s"]
           for p in r.parts if p.run_id and p.index != 2}
    assert sum(own.values()) <= 0.8 * 6.0 - took + 1e-6


MLP = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, x):
        return self.layers(x)

def get_inputs():
    return [torch.randn(4, 16)]

def get_init_inputs():
    return []
'''


def test_a_model_whose_parts_the_offline_proposer_has_nothing_for_is_optimized_whole(tmp_path) -> None:
    # KernelBench level 3's MLP on the H200: its parts are Linear alone (the library's GEMM) and a ReLU too small for
    # a loop, so in parts nothing was tried; whole, the offline proposer fuses each ReLU into the GEMM before it
    mlp = problem_from_source(MLP, "mlp.py")
    dec = decompose(mlp)
    assert [p.spelled for p in dec.parts][0] == "torch.nn.Linear(16, 32)"
    dec = dec.model_copy(update={"parts": tuple(p.model_copy(update={"share": 0.45 if "Linear" in p.spelled else
                                                                     0.005}) for p in dec.parts)})
    cfg = parts_config(tmp_path, max_candidates=2).model_copy(update={"llm": None, "offline": True})
    r = run_parts(mlp, cfg, sandbox=Untagged(), split=dec)
    assert r.parts == () and r.proposals == 2 and r.best_candidate_id is not None
    assert not (r.run_dir / "parts.json").exists()
