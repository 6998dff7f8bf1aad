"""propose: one job → prompt → LLM → extracted source → novelty check → evaluate."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from kevolve.agent.context import Context
from kevolve.agent.extract import extract_code
from kevolve.agent.llm.base import Completion, LLMError, Message, NonRetryableLLMError
from kevolve.agent.prompting import (DEFAULT_PROMPTS, Prompts, describe_failure, describe_performance,
                                     device_notes, examples_block)
from kevolve.agent.state import Example, Job, Trial
from kevolve.records import Candidate, Origin, Problem

log = logging.getLogger(__name__)


def build_messages(job: Job, problem: Problem, parents: list[Trial], examples: Sequence[Example | str],
                   device: str, language: str | None = None, prompts: Prompts = DEFAULT_PROMPTS) -> list[Message]:
    """The system prompt and the operator's prompt, filled from the parents' sources and verdicts, asking for
    kernels in `language` (None: the target's default)."""
    common = {"problem_source": problem.source.strip(), "device_notes": device_notes(device, language, prompts)}
    op = job.operator
    if op is Origin.TRANSLATE or not parents or any(p.candidate is None or p.evaluation is None for p in parents):
        user = prompts.render("translate", examples=examples_block(examples), **common)
    elif op is Origin.REPAIR:
        p = parents[0]
        assert p.candidate is not None and p.evaluation is not None
        user = prompts.render("repair", candidate_source=p.candidate.source.strip(),
                             outcome=p.evaluation.outcome.value, failure=describe_failure(p.evaluation), **common)
    elif op is Origin.CROSSOVER and len(parents) >= 2:
        a, b = parents[0], parents[1]
        user = prompts.render("crossover", source_a=a.candidate.source.strip(),  # type: ignore[union-attr]
                             performance_a=describe_performance(a.evaluation),  # type: ignore[arg-type]
                             source_b=b.candidate.source.strip(),  # type: ignore[union-attr]
                             performance_b=describe_performance(b.evaluation), **common)  # type: ignore[arg-type]
    else:
        p = parents[0]
        user = prompts.render("mutate", candidate_source=p.candidate.source.strip(),  # type: ignore[union-attr]
                             performance=describe_performance(p.evaluation), **common)  # type: ignore[arg-type]
    return [Message(role="system", content=prompts.render("system")), Message(role="user", content=user)]


def _skip(job: Job, status: str, note: str, reply: Completion | None, **kw: Any) -> Command:
    usage = {} if reply is None else dict(prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                                          cost_usd=reply.cost_usd, llm_cached=reply.cached)
    trial = Trial(job=job, status=status, note=note, **usage, **kw)  # type: ignore[arg-type]
    return Command(goto=Send("evaluate", {"trial": trial}))


def _prebuild(ctx: Context, cand: Candidate) -> None:
    """Start compiling the candidate's extensions now; the evaluation finds them built (or builds them)."""
    if ctx.prebuild is None:
        return
    try:
        ctx.prebuild.submit_source(cand.source)
    except Exception as e:  # noqa: BLE001 - building ahead is an optimisation, never a reason to stop
        log.warning("prebuild of %s not started: %s", cand.id, e)


def propose(task: dict[str, Any], runtime: Runtime[Context]) -> Command:
    ctx = runtime.context
    job: Job = task["job"]
    problem: Problem = task["problem"]
    parents: list[Trial] = task.get("parents", [])
    messages = build_messages(job, problem, parents, task.get("examples", []), ctx.config.sandbox.device,
                              ctx.config.language, ctx.prompts)
    if ctx.fatal is not None:  # a concurrent proposal already hit a permanent error
        raise NonRetryableLLMError(ctx.fatal)
    try:
        proposal = ctx.proposer.propose(job, parents, messages, sample=f"{ctx.config.evolution.seed}:{job.id}")
    except NonRetryableLLMError as e:
        ctx.fatal = str(e)
        raise  # bad key, unknown model: stop the run
    except LLMError as e:
        log.warning("%s: %s", job.id, e)
        return _skip(job, "llm_error", str(e), None)
    reply, source = proposal.reply, proposal.source
    if source is None:
        got = extract_code(reply.text)
        if got.source is None:
            log.info("%s (%s): no usable code: %s", job.id, job.operator.value, got.reason)
            return _skip(job, "no_code", got.reason, reply)
        source = got.source
    cand = Candidate.from_source(source, problem.id, parent_ids=job.parent_ids, origin=proposal.origin or job.operator,
                                 proposer=proposal.proposer or ctx.proposer.name, prompt_tokens=reply.prompt_tokens,
                                 completion_tokens=reply.completion_tokens, cost_usd=reply.cost_usd,
                                 generation=job.generation,
                                 offline=proposal.offline)
    depth = parents[0].repair_depth + 1 if job.operator is Origin.REPAIR and parents else 0
    dup = ctx.novelty.claim(cand.id, cand.source)
    if dup is not None:
        log.info("%s (%s): near-duplicate of %s, not evaluated", job.id, job.operator.value, dup)
        return _skip(job, "duplicate", f"duplicate: near-duplicate of {dup}", reply, candidate=cand,
                     repair_depth=depth)
    _prebuild(ctx, cand)
    trial = Trial(job=job, status="evaluated", candidate=cand, repair_depth=depth, prompt_tokens=reply.prompt_tokens,
                  completion_tokens=reply.completion_tokens, cost_usd=reply.cost_usd, llm_cached=reply.cached)
    return Command(goto=Send("evaluate", {"trial": trial, "problem": problem, "race_ms": task.get("race_ms")}))
