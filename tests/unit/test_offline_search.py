"""Offline proposer: parameter space, the evolutionary search, and the agent loop driving it."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from kevolve.agent.config import EvolutionConfig, LLMConfig, OptimizeConfig, StopConfig
from kevolve.agent.llm.base import Message
from kevolve.agent.llm.scripted import ScriptedLLM
from kevolve.agent.proposer import LLMProposer, OfflineProposer, SeededProposer, make_proposer
from kevolve.offline.generate import Generated, plan
from kevolve.offline.proposer import OfflineGenerator
from kevolve.offline.search import search
from kevolve.offline.space import default_params, legal, mutate
from kevolve.agent.run import OptimizeError, run_optimize
from kevolve.agent.state import Job
from kevolve.contract import load_problem
from kevolve.records import Candidate, Evaluation, Origin, Outcome, TimingStats
from kevolve.runfiles import RunFiles
from kevolve.sandbox.config import SandboxConfig

FIXTURES = Path(__file__).parent.parent / "fixtures" / "offline"


def _timing(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, trials=10, method="fake")


def fake_verdict(got: Generated | Candidate, problem_id: str, cand_id: str = "c") -> Evaluation:
    """ok, faster the closer the first kernel's block is to 1024 (eager is 1 ms): read from the choice the
    candidate carries, as the loop hands it over."""
    choice = got.choice if isinstance(got, Generated) else got.offline
    assert choice is not None
    ms = 1.0 / (1.0 + choice.groups[0].block / 256)
    return Evaluation(candidate_id=cand_id, problem_id=problem_id, outcome=Outcome.OK, reason="ok",
                      timing=_timing(ms), ref_timing=_timing(1.0))


class FakeSandbox:
    def __init__(self) -> None:
        self.candidates: list[Candidate] = []

    def evaluate(self, problem, candidate: Candidate, config) -> Evaluation:  # noqa: ANN001
        self.candidates.append(candidate)
        return fake_verdict(candidate, problem.id, candidate.id)


def test_mutation_changes_settings_and_stays_legal():
    g = plan(load_problem(FIXTURES / "chain_scalars.py")).fused[0].group  # 7*37*3 elements: not a multiple of 2
    rng = random.Random(0)
    p = legal(default_params(g), g)
    assert p.vec == 1
    seen = {p}
    for _ in range(30):
        p = mutate(p, g, rng)
        assert p.vec == 1 and p.block in (64, 128, 256, 512, 1024)
        seen.add(p)
    assert len(seen) > 5


def test_a_generated_source_carries_no_parameters_to_read_back():
    """The choice travels as Candidate.offline; the source keeps only a comment for its reader."""
    p = plan(load_problem(FIXTURES / "linear_gelu_softmax.py"))
    got = p.generate()
    assert got.choice.technique == "cuda" and list(got.choice.groups) == p.legalize(p.defaults())
    assert "kevolve-offline:" not in got.source and "# offline parameters (cuda): " in got.source
    assert got.source == p.source()


def test_search_improves_on_the_defaults():
    p = plan(load_problem(FIXTURES / "linear_gelu_softmax.py"))
    res = search(p, lambda got: fake_verdict(got, p.problem.id), budget=12, seed=0)  # 15 of seeds 0-19 improve
    assert len(res.trials) == 12
    first, best = res.trials[0], res.best
    assert best is not None and best.fitness > first.fitness
    assert len({repr(t.params) for t in res.trials}) == 12  # never the same parameters twice


def test_search_ranks_by_the_lower_of_the_device_and_launch_inclusive_speedups():
    """Larger blocks: faster on the device, but (in this fake) more host work per launch, which only the
    launch-inclusive time sees. The best is the best of the lower speedup, not the fastest device time."""
    p = plan(load_problem(FIXTURES / "linear_gelu_softmax.py"))

    def verdict(got: Generated) -> Evaluation:
        block = got.choice.groups[0].block
        ev = fake_verdict(got, p.problem.id)
        return ev.model_copy(update={"launch_timing": _timing(0.2 + block / 1024), "ref_launch_timing": _timing(1.0)})

    res = search(p, verdict, budget=12, seed=0)
    ok = [t for t in res.trials if t.evaluation.ok]
    best = res.best
    assert best is not None
    assert best.fitness == max(t.fitness for t in ok)
    assert best.fitness == min(best.evaluation.speedup, best.evaluation.speedup_launch)
    assert max(t.evaluation.speedup for t in ok) > best.evaluation.speedup  # a faster device time lost on launch work
    no_launch = fake_verdict(p.generate(best.params), p.problem.id)
    assert no_launch.speedup_launch is None and no_launch.fitness == no_launch.speedup
    failed = no_launch.model_copy(update={"outcome": Outcome.INCORRECT, "launch_timing": _timing(0.1),
                                          "ref_launch_timing": _timing(1.0)})
    assert failed.fitness == 0.0 and failed.speedup_launch is None
    js = best.evaluation.to_json_dict()
    assert js["speedup_launch"] == best.evaluation.speedup_launch and js["fitness"] == best.fitness
    assert js["launch_timing"]["median_ms"] == best.evaluation.launch_timing.median_ms


def test_search_tries_split_rows_first_when_rows_are_few():
    p = plan(load_problem(FIXTURES / "mse_loss.py"))  # one row: the whole tensor
    res = search(p, lambda got: fake_verdict(got, p.problem.id), budget=2)
    assert [t.params[0].strategy for t in res.trials] == ["block", "split"]


def test_search_stops_when_the_defaults_fail():
    p = plan(load_problem(FIXTURES / "rmsnorm.py"))
    bad = Evaluation(candidate_id="c", problem_id=p.problem.id, outcome=Outcome.INCORRECT, reason="incorrect: x")
    res = search(p, lambda got: bad, budget=5)
    assert len(res.trials) == 1 and res.best is None


def _config(tmp_path, n: int, offline: bool = True) -> OptimizeConfig:
    llm = None if offline else LLMConfig(provider="scripted", model="m")
    return OptimizeConfig(llm=llm, offline=offline, runs_dir=tmp_path, archive=False,
                          sandbox=SandboxConfig(device="cpu", seed=1),
                          evolution=EvolutionConfig(islands=1, jobs_per_generation=2, concurrency=1, seed=5),
                          stop=StopConfig(max_candidates=n, patience=10))


def test_agent_loop_tunes_offline_candidates(tmp_path):
    problem = load_problem(FIXTURES / "conv_relu_bias.py")
    sandbox = FakeSandbox()
    result = run_optimize(problem, _config(tmp_path, 10), sandbox=sandbox, retriever=None)
    blocks = [c.offline.groups[0].block for c in sandbox.candidates]
    assert len(sandbox.candidates) == result.evaluated >= 8  # a proposal that repeats an earlier one is not evaluated
    assert blocks[0] == default_params(plan(problem).fused[0].group).block
    assert max(blocks) > blocks[0]  # mutations of the parents' parameters found larger blocks
    assert result.speedup is not None and result.speedup > 1.0 + blocks[0] / 256


def test_an_offline_candidate_saved_before_choices_were_records_is_mutated_from_its_old_comment(tmp_path):
    """Run folders written until 2026-11-27 kept the choice only as a `# kevolve-offline:` line in the source: the
    record reads it on loading, and the generator mutates from it as from a new record."""
    problem = load_problem(FIXTURES / "conv_relu_bias.py")
    gen = OfflineGenerator(problem, seed=3)
    p = gen.plan()
    old = [legal(replace(default_params(f.group), block=1024), f.group) for f in p.fused]
    groups = ",".join(json.dumps({"block": x.block, "vec": x.vec, "ilp": x.ilp, "waves": x.waves}) for x in old)
    source = p.source(old).replace("# offline parameters", f'# kevolve-offline: {{"problem":"{problem.id}","groups":[{groups}]}}\n#', 1)
    cand = Candidate.from_source(source, problem.id, origin=Origin.TRANSLATE, proposer="offline").model_dump()
    del cand["offline"]  # as the old writer wrote it
    (tmp_path / "candidates").mkdir()
    (tmp_path / "candidates" / "c.json").write_text(json.dumps({"format": 2, "candidate": cand}))
    saved = RunFiles(tmp_path, problem.id).load("c")
    assert saved is not None and saved.candidate.offline is not None
    assert saved.candidate.offline.technique == "cuda" and [g.block for g in saved.candidate.offline.groups] == [1024]
    child = gen.propose(Origin.MUTATE, [saved.candidate])
    assert child.choice.groups != saved.candidate.offline.groups and "kevolve-offline" not in child.source
    other = saved.candidate.model_dump() | {"problem_id": "another-problem", "id": "x"}
    del other["offline"]
    assert Candidate.model_validate(other).offline is None  # another problem's line is not this problem's choice


def test_offline_proposer_stops_the_run_with_the_trace_verdict(tmp_path):
    problem = load_problem(FIXTURES / "only_sort.py")
    with pytest.raises(OptimizeError, match="nothing_to_fuse"):
        run_optimize(problem, _config(tmp_path, 2), sandbox=FakeSandbox(), retriever=None)


def test_seeded_proposer_answers_the_first_translation_offline():
    problem = load_problem(FIXTURES / "conv_relu_bias.py")
    llm = LLMProposer(ScriptedLLM([], default="from the llm"))
    seeded = SeededProposer(llm, OfflineProposer(OfflineGenerator(problem)), seeds=1)
    msgs = [Message(role="user", content="translate this")]
    job = lambda jid, gen: Job(id=jid, operator="translate", island=0, generation=gen)  # noqa: E731
    first = seeded.propose(job("g0-j0", 0), [], msgs, "0:g0-j0")
    second = seeded.propose(job("g0-j1", 0), [], msgs, "0:g0-j1")
    later = seeded.propose(job("g1-j0", 1), [], msgs, "0:g1-j0")
    assert "class ModelNew(Model)" in first.source and first.reply.model == "offline" and first.offline is not None
    assert second.reply.text == later.reply.text == "from the llm" and second.source is None is second.offline


def _cuda_config(tmp_path, provider: str = "compatible") -> OptimizeConfig:
    return OptimizeConfig(llm=LLMConfig(provider=provider, model="m", base_url="http://127.0.0.1:9/v1"),
                          runs_dir=tmp_path, sandbox=SandboxConfig(device="cuda", seed=1))


def test_every_run_gets_offline_seeds_only_when_cuda_and_traceable(tmp_path):
    """run_optimize builds its proposer with make_proposer, whichever entry point called it."""
    fusable, library = load_problem(FIXTURES / "conv_relu_bias.py"), load_problem(FIXTURES / "only_sort.py")
    scripted = ScriptedLLM([])
    assert isinstance(make_proposer(fusable, _config(tmp_path, 2)), OfflineProposer)
    assert isinstance(make_proposer(fusable, _cuda_config(tmp_path)), SeededProposer)
    assert isinstance(make_proposer(fusable, _cuda_config(tmp_path), scripted), SeededProposer)  # an injected LLM too
    no_seeds = _cuda_config(tmp_path).model_copy(update={"offline_seeds": 0})
    for problem, config in ((library, _cuda_config(tmp_path)), (fusable, _config(tmp_path, 2, offline=False)),
                            (fusable, no_seeds)):  # nothing to seed with; a CPU run (CUDA seeds are useless); off
        got = make_proposer(problem, config, scripted)
        assert isinstance(got, LLMProposer) and got.llm is scripted


def test_a_config_saved_with_the_old_offline_sentinel_reads_as_offline():
    saved = ('{"llm": {"provider": "compatible", "model": "offline", "base_url": "http://offline"}, '
             '"sandbox": {"device": "cuda"}}')
    config = OptimizeConfig.model_validate_json(saved)
    assert config.offline and config.llm is None
    with pytest.raises(ValueError, match="an LLM is needed unless the run is offline"):
        OptimizeConfig.model_validate_json('{"sandbox": {"device": "cuda"}}')


def test_cli_offline_refuses_a_cpu_device():
    from typer.testing import CliRunner

    from kevolve.cli import app

    res = CliRunner().invoke(app, ["optimize", str(FIXTURES / "conv_relu_bias.py"), "--offline", "--device", "cpu"])
    assert res.exit_code == 2
    assert "--offline generates CUDA kernels" in res.output


def test_a_run_of_equal_settings_is_written_once_with_its_count():
    """An unrolled RNN is hundreds of identical step kernels: the summary table's settings cell said each."""
    from kevolve.offline.space import describe_all

    p = plan(load_problem(FIXTURES / "chain_scalars.py"))
    params, groups = p.defaults()[:1], [f.group for f in p.fused][:1]
    one = describe_all(params, groups)
    assert describe_all(params * 3, groups * 3) == f"{one} x3" and "x" not in one.split()[-1]
