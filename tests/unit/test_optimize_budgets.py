"""Budgets are hard: every LLM call counts against --max-candidates whatever came back, a dollar budget is
never overspent, and a problem that cannot run here is refused before the first call (issue 37).

The whole graph with a scripted LLM and the fake sandbox of test_graph_fake_sandbox (same interface)."""

from __future__ import annotations

import json

import pytest
from test_graph_fake_sandbox import PROBLEM, FakeSandbox, config, reply

from kevolve.agent.budget import FIRST_PROMPT_TOKENS, dearest_call, proposals_left
from kevolve.agent.config import EvolutionConfig, LLMConfig, StopConfig
from kevolve.agent.llm.scripted import ScriptedLLM
from kevolve.agent.run import UsageError, run_optimize
from kevolve.agent.state import Job, Trial
from kevolve.contract import ProblemTooLarge
from kevolve.records import Origin


class Priced(ScriptedLLM):
    """A scripted LLM whose every reply costs `usd`, as a paid API's would."""

    def __init__(self, rules, usd: float, **kw) -> None:  # noqa: ANN001, ANN003
        super().__init__(rules, **kw)
        self.usd = usd

    def complete(self, messages, **opts):  # noqa: ANN001, ANN003, ANN201
        return super().complete(messages, **opts).model_copy(update={"cost_usd": self.usd})


def distinct_slow(n: int) -> list[str]:
    return [reply("slow", f"v{i}") for i in range(n)]


def test_replies_without_code_count_against_max_candidates(tmp_path) -> None:
    llm = ScriptedLLM([], default="I would rather not write a kernel today.")
    cfg = config(tmp_path).model_copy(update={"stop": StopConfig(max_candidates=3)})
    r = run_optimize(PROBLEM, cfg, llm=llm, sandbox=FakeSandbox())
    assert len(llm.calls) == 3 and r.proposals == 3 and r.outcomes == {"no_code": 3}
    assert r.stop_reason.startswith("max_candidates: 3 proposals")


def test_duplicates_count_against_max_candidates(tmp_path) -> None:
    llm = ScriptedLLM([("Task:", [reply("slow")])])  # the same source every time: one evaluation, then duplicates
    sandbox = FakeSandbox()
    cfg = config(tmp_path).model_copy(update={"stop": StopConfig(max_candidates=5, patience=10)})
    r = run_optimize(PROBLEM, cfg, llm=llm, sandbox=sandbox)
    assert len(llm.calls) == 5 and sandbox.seen == ["slow"] and r.outcomes == {"ok": 1, "duplicate": 4}


def test_a_dollar_budget_is_never_overspent(tmp_path) -> None:
    llm = Priced([("Task:", distinct_slow(20))], usd=0.4)
    r = run_optimize(PROBLEM, config(tmp_path, budget_usd=1.0), llm=llm, sandbox=FakeSandbox())
    assert r.cost_usd <= 1.0 and len(llm.calls) == 2  # a third call at $0.40 would pass $1.00
    assert r.stop_reason.startswith("budget: spent $0.8000 of $1.0000; the next call could cost up to $0.4000")


def test_a_priced_model_gets_no_more_calls_than_a_full_reply_each_could_cost(tmp_path) -> None:
    """gpt-4o at $2.5 / $10 per M tokens: before any call is seen, one may cost 4,000 prompt tokens and a full
    8,192-token reply, $0.0919; so $0.20 buys two calls in generation 0 however cheap they turn out."""
    llm = Priced([("Task:", distinct_slow(20))], usd=0.05)
    cfg = config(tmp_path, budget_usd=0.2).model_copy(update={"llm": LLMConfig(provider="scripted", model="gpt-4o")})
    cfg = cfg.model_copy(update={"evolution": EvolutionConfig(islands=1, jobs_per_generation=4, seed=7)})
    r = run_optimize(PROBLEM, cfg, llm=llm, sandbox=FakeSandbox())
    first = [c for c in llm.calls if c[-1].content.startswith("Task: translate")]
    assert len(first) == 2 and r.cost_usd <= 0.2 and r.stop_reason.startswith("budget")


def test_dearest_call_and_proposals_left_are_pure_rules() -> None:
    job = Job(id="g0-j0", operator=Origin.TRANSLATE, island=0, generation=0)
    trials = [Trial(job=job, status="no_code", prompt_tokens=900, cost_usd=0.03)]
    assert dearest_call([], lambda p: p / 1e5) == FIRST_PROMPT_TOKENS / 1e5
    assert dearest_call(trials, lambda p: p / 1e5) == pytest.approx(0.03)  # the dearest seen beats 900 tokens' price
    assert dearest_call(trials, None) == pytest.approx(0.03)
    assert proposals_left(trials, StopConfig(max_candidates=10, budget_usd=0.1), 0.03) == 2  # $0.07 left
    assert proposals_left(trials, StopConfig(max_candidates=2, budget_usd=None), 0.03) == 1


class TooLarge(FakeSandbox):
    """A sandbox on a machine where the problem's data cannot fit, as LocalSandbox reports it."""

    def reference(self, problem, config):  # noqa: ANN001, ANN201
        raise ProblemTooLarge("relu.py: memory_limit: checking candidates needs about 30.0 GiB of host memory")

    def evaluate(self, problem, candidate, config):  # noqa: ANN001, ANN201
        self.reference(problem, config)


def test_a_problem_that_cannot_fit_is_refused_before_the_first_llm_call(tmp_path) -> None:
    llm = ScriptedLLM([("Task:", distinct_slow(4))])
    with pytest.raises(UsageError, match="memory_limit"):
        run_optimize(PROBLEM, config(tmp_path), llm=llm, sandbox=TooLarge())
    assert llm.calls == []


def test_each_generation_says_how_much_of_each_budget_is_used(tmp_path, caplog) -> None:  # noqa: ANN001
    import logging

    llm = Priced([("Task:", distinct_slow(20))], usd=0.25)
    cfg = config(tmp_path, budget_usd=1.0).model_copy(update={"stop": StopConfig(
        max_candidates=3, budget_usd=1.0, time_limit_s=600)})
    with caplog.at_level(logging.INFO, logger="kevolve"):
        run_optimize(PROBLEM, cfg, llm=llm, sandbox=FakeSandbox())
    done = [r.getMessage() for r in caplog.records if "done: best" in r.getMessage()]
    assert done, [r.getMessage() for r in caplog.records]
    last = done[-1]
    assert "used proposals 3/3, $0.7500/$1.00, " in last and last.split("used ")[1].split("; stop")[0].endswith("/600 s")
    assert len(done) == 2 and " s left" in done[0] and " s left" not in last  # a pace once proposals are made


def test_the_time_left_is_the_first_budget_to_run_out_at_the_pace_so_far() -> None:
    from kevolve.agent.budget import time_left

    assert time_left([], StopConfig(max_candidates=10), 5.0) is None
    # 4 proposals in 100 s (replies without code count): 6 more take 150 s; the dollars ($0.40 of $1.00) last 150 s
    four = [Trial(job=Job(id=f"g0-j{i}", operator=Origin.TRANSLATE, island=0, generation=0), status="no_code",
                  cost_usd=0.1) for i in range(4)]
    assert time_left(four, StopConfig(max_candidates=10, budget_usd=1.0, time_limit_s=600), 100.0) == 150.0
    assert time_left(four, StopConfig(max_candidates=100, time_limit_s=300), 100.0) == 200.0
    assert time_left(four, StopConfig(max_candidates=100, budget_usd=0.5), 100.0) == pytest.approx(25.0)


def test_the_report_shows_the_speedup_over_the_generations(tmp_path) -> None:
    llm = ScriptedLLM([("Task:", [reply("slow", "v0"), reply("fast", "v1"), reply("slow", "v2")])])
    cfg = config(tmp_path).model_copy(update={"stop": StopConfig(max_candidates=3)})
    r = run_optimize(PROBLEM, cfg, llm=llm, sandbox=FakeSandbox())
    report = (r.run_dir / "report.md").read_text()
    section = report.split("## Speedup by generation", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == r.generations >= 2, section
    so_far = [float(row.split("|")[5].strip().rstrip("x")) for row in rows]
    assert so_far == sorted(so_far) and so_far[-1] == pytest.approx(r.speedup), section  # never goes down
    assert rows[-1].rstrip(" |").endswith("█" * 20)  # the run's best: the full bar


class Wordy(ScriptedLLM):
    """A scripted LLM whose every call takes `prompt` + `reply` tokens, as a real API reports them."""

    def __init__(self, rules, prompt: int, reply: int, **kw) -> None:  # noqa: ANN001, ANN003
        super().__init__(rules, **kw)
        self.sizes = (prompt, reply)

    def complete(self, messages, **opts):  # noqa: ANN001, ANN003, ANN201
        p, r = self.sizes
        return super().complete(messages, **opts).model_copy(update={"prompt_tokens": p, "completion_tokens": r})


def test_the_token_budget_is_never_passed(tmp_path) -> None:
    """--budget-tokens: each generation gets no more calls than the tokens left pay for at the longest prompt plus a
    full reply; the run ends with its reason, every token counted within the limit."""
    from kevolve.agent.budget import tokens_used

    llm = Wordy([], prompt=1_000, reply=400, default=reply("slow", "same"))
    cfg = config(tmp_path, budget_tokens=40_000).model_copy(update={
        "stop": StopConfig(max_candidates=30, budget_tokens=40_000, patience=20),
        "llm": LLMConfig(provider="scripted", model="fake", max_tokens=2_000)})
    r = run_optimize(PROBLEM, cfg, llm=llm, sandbox=FakeSandbox())
    used = len(llm.calls) * 1_400
    assert used <= 40_000 and len(llm.calls) >= 20, len(llm.calls)  # 3,000 a call at most: it stops near 40k
    assert r.stop_reason.startswith("budget_tokens: "), r.stop_reason
    trials = [json.loads(line) for line in (r.run_dir / "trials.jsonl").read_text().splitlines()]
    assert len(trials) == len(llm.calls)
    unlimited = Wordy([], prompt=1_000, reply=400, default=reply("slow", "same"))
    run_optimize(PROBLEM, cfg.model_copy(update={"stop": StopConfig(max_candidates=30, patience=20)}),
                 llm=unlimited, sandbox=FakeSandbox())
    assert len(unlimited.calls) == 30 > len(llm.calls)  # the token limit is what stopped it
    assert tokens_used([]) == 0


class Slow(FakeSandbox):
    """The fake sandbox's verdicts, each holding the device `wall_s` seconds; its audit as long again."""

    def __init__(self, wall_s: float) -> None:
        super().__init__()
        self.wall_s, self.audits = wall_s, []

    def evaluate(self, problem, candidate, config):  # noqa: ANN001, ANN201
        return super().evaluate(problem, candidate, config).model_copy(update={"wall_s": self.wall_s})

    def audit(self, problem, candidate, config, ev):  # noqa: ANN001, ANN201
        from kevolve.sandbox.judge.audit import decide

        self.audits.append(self.wall_s)
        return decide(ev, ev, None, (1,), self.wall_s)


def test_the_device_budget_keeps_the_evaluations_and_the_audit_within_it(tmp_path) -> None:
    """--budget-device: no more evaluations than the device-seconds left pay for at the longest so far (60 s before
    any), one kept back for the final audit; evaluations and audit together stay within the limit."""
    sandbox = Slow(wall_s=20.0)
    replies = [reply("slow", f"v{i}") for i in range(40)]
    llm = ScriptedLLM([("Task:", replies)])
    cfg = config(tmp_path).model_copy(update={"stop": StopConfig(max_candidates=40, budget_device_s=200.0,
                                                                  patience=30)})
    r = run_optimize(PROBLEM, cfg, llm=llm, sandbox=sandbox)
    evaluated = len(sandbox.seen)
    assert r.stop_reason.startswith("budget_device_s: "), r.stop_reason
    assert evaluated * 20.0 + sum(sandbox.audits) <= 200.0, (evaluated, sandbox.audits)
    assert evaluated >= 7 and sandbox.audits == [20.0]  # it used the budget, not just the first guess's share
    # below two first-guess evaluations (one to run, one for the audit) nothing is proposed at all
    none = ScriptedLLM([("Task:", replies)])
    r = run_optimize(PROBLEM, cfg.model_copy(update={"stop": StopConfig(max_candidates=40, budget_device_s=100.0)}),
                     llm=none, sandbox=Slow(wall_s=20.0))
    assert not none.calls and r.stop_reason.startswith("budget_device_s: "), r.stop_reason
    assert "give --budget-device 120s or more" in r.stop_reason, r.stop_reason  # what would do, not just "no"
    assert r.message.startswith("nothing was tried (budget_device_s: ") and r.message.endswith("keep your module")
    assert "Nothing was tried (budget_device_s: " in (r.run_dir / "report.md").read_text()


def test_budget_strings_name_tokens_and_device_time() -> None:
    from kevolve.agent.settings import SettingsError, parse_budget

    assert parse_budget("200k tokens, 20m gpu, $5, 40") == {
        "budget_tokens": 200_000, "budget_device_s": 1200.0, "budget_usd": 5.0, "max_candidates": 40}
    assert parse_budget("1.5m tok,600 device") == {"budget_tokens": 1_500_000, "budget_device_s": 600.0}
    with pytest.raises(SettingsError, match="device time"):
        parse_budget("many gpu")
