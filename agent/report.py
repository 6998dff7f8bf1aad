"""The run's results: best_model.py, lineage.json, report.md and result.json."""

from __future__ import annotations

import difflib
from collections import Counter

from kevolve.agent.budget import device_used
from kevolve.agent.evolution import best_candidate
from kevolve.agent.result import LineageStep, Result
from kevolve.agent.rundir import RunFolder
from kevolve.agent.state import RunState, Trial
from kevolve.records import Answer


def _changed(a: str, b: str) -> int:
    return sum(1 for line in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---")))


def lineage(best: Trial, trials: list[Trial]) -> list[LineageStep]:
    """The winner's ancestry, oldest first, following first parents."""
    index = {t.candidate.id: t for t in trials if t.candidate is not None and t.evaluation is not None}
    steps: list[LineageStep] = []
    cur: Trial | None = best
    while cur is not None and cur.candidate is not None and len(steps) < 200:
        parent = index.get(cur.job.parent_ids[0]) if cur.job.parent_ids else None
        ev = cur.evaluation
        assert ev is not None
        changed = _changed(parent.candidate.source, cur.candidate.source) if parent and parent.candidate else 0
        steps.append(LineageStep(candidate_id=cur.candidate.id, operator=cur.job.operator.value,
                                 generation=cur.job.generation, outcome=ev.outcome.value, speedup=ev.speedup,
                                 reason=ev.reason, parent_ids=cur.job.parent_ids, lines_changed=changed))
        cur = parent
    return steps[::-1]


def summarize(run: RunFolder, state: RunState, reason: str) -> Result:
    trials = state.get("trials", [])
    best = best_candidate(trials)
    ev = best.evaluation if best else None
    outcomes = Counter(t.evaluation.outcome.value if t.evaluation else t.status for t in trials)
    return Result(
        run_id=run.run_id, run_dir=run.path, problem=state["problem"].name, stop_reason=reason,
        answer=Answer.NONE_CORRECT if ev is None else Answer.of(ev.speedup or 0.0),
        best_candidate_id=best.candidate_id if best else None,
        best_path=run.path / "best_model.py" if best else None,
        speedup=ev.speedup if ev else None, speedup_vs_compile=ev.speedup_vs_compile if ev else None,
        best_ms=ev.runtime_ms if ev else None, eager_ms=ev.eager_ms if ev else None,
        compile_ms=ev.compile_ms if ev else None, proposals=len(trials),
        evaluated=sum(1 for t in trials if t.status == "evaluated"), outcomes=dict(outcomes),
        generations=state.get("generation", 0), cost_usd=sum(t.cost_usd for t in trials),
        prompt_tokens=sum(t.prompt_tokens for t in trials), completion_tokens=sum(t.completion_tokens for t in trials),
        cached_replies=sum(1 for t in trials if t.llm_cached), elapsed_s=state.get("elapsed_s", 0.0),
        device_s=device_used(trials) + sum(t.evaluation.audit.wall_s for t in trials
                                           if t.evaluation is not None and t.evaluation.audit is not None),
        lineage=tuple(lineage(best, trials)) if best else ())


def lineage_diffs(r: Result, trials: list[Trial], max_lines: int = 40) -> str:
    """What changed along the lineage: each step's diff against its parent (truncated)."""
    src = {t.candidate.id: t.candidate.source for t in trials if t.candidate is not None}
    out = []
    for prev, step in zip(r.lineage, r.lineage[1:]):
        diff = list(difflib.unified_diff(src.get(prev.candidate_id, "").splitlines(),
                                         src.get(step.candidate_id, "").splitlines(), lineterm="", n=1))[2:]
        more = f"\n… {len(diff) - max_lines} more lines" if len(diff) > max_lines else ""
        out.append(f"### {step.operator} `{prev.candidate_id}` → `{step.candidate_id}` ({step.outcome}, "
                   f"{'—' if step.speedup is None else f'{step.speedup:.3f}x'})\n\n```diff\n"
                   + "\n".join(diff[:max_lines]) + f"{more}\n```\n")
    return "\n".join(out)


def render_report(r: Result) -> str:
    """report.md: the headline numbers, the winner's lineage, and where the budget went."""
    fmt = lambda x, unit="": "—" if x is None else f"{x:.3f}{unit}"  # noqa: E731
    lines = [f"# kevolve run {r.run_id}: {r.problem}", "",
             f"Stopped: {r.stop_reason}", "",
             "| | time (ms) | speedup |", "|---|---|---|",
             f"| best candidate | {fmt(r.best_ms)} | |",
             f"| PyTorch eager | {fmt(r.eager_ms)} | {fmt(r.speedup, 'x')} |",
             f"| torch.compile | {fmt(r.compile_ms)} | {fmt(r.speedup_vs_compile, 'x')} |", "",
             f"{r.proposals} proposals, {r.evaluated} evaluated over {r.generations} generations in "
             f"{r.elapsed_s:.0f} s ({r.elapsed_s / max(r.generations, 1):.1f} s per generation); "
             f"LLM cost ${r.cost_usd:.4f} ({r.prompt_tokens} prompt + {r.completion_tokens} completion tokens, "
             f"{r.cached_replies} replies from the cache).", "",
             "Outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(r.outcomes.items())), ""]
    if r.lineage:
        lines += ["## The winner's lineage", "", "| gen | operator | candidate | outcome | speedup | lines changed |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {s.generation} | {s.operator} | `{s.candidate_id}` | {s.outcome} | {fmt(s.speedup, 'x')} | "
                  f"{s.lines_changed} |" for s in r.lineage]
    lines += ["", _answer(r)]
    return "\n".join(lines) + "\n"


def _answer(r: Result) -> str:
    """report.md's closing line: a drop-in replacement only for a kernel faster than eager."""
    if r.answer is Answer.IMPROVED:
        return (f"Drop-in replacement ({r.speedup:.2f}x faster than PyTorch eager): `{r.best_path}` (class `ModelNew`, "
                "same constructor as `Model`).")
    if r.answer is Answer.NOT_FASTER:
        return (f"**Nothing beat eager (best {r.speedup or 0:.2f}x): keep your module.** The fastest correct "
                f"candidate, slower than PyTorch eager, is in `{r.best_path}` for reference.")
    if not r.proposals:
        return f"Nothing was tried ({r.stop_reason}): keep your module."
    return "No candidate was correct: keep your module."


def audit_section(trials: list[Trial]) -> str:
    """report.md's account of the audit: each audited candidate, what the search measured, what the audit said."""
    audited = [t for t in trials if t.evaluation is not None and t.evaluation.audit is not None]
    if not audited:
        return ""
    lines = ["## Audit", "", "The winner measured again in a fresh runner, on fresh inputs, with the judge's own clock "
             "(an overturned winner is `rejected` and the next fastest is audited; a winner the audit reads slower keeps "
             "the lower speed, and gives way to the next fastest if that puts it below).", "",
             "| candidate | search's speedup | audit's speedup (measured again) | judge's own clock, end to end "
             "(launch work included) | verdict |", "|---|---|---|---|---|"]
    fmt = lambda x: "—" if x is None else f"{x:.3f}x"  # noqa: E731
    for t in audited:
        ev = t.evaluation
        assert ev is not None and ev.audit is not None
        reason = ev.audit.reason.replace("|", "\\|")
        claimed = ev.audit.evaluation_speedup or (  # where the audit's lower speed stands, the verdict's times are its
            ev.eager_ms / ev.runtime_ms if ev.eager_ms and ev.runtime_ms else None)  # also when overturned
        lines.append(f"| `{t.candidate_id}` | {fmt(claimed)} | {fmt(ev.audit.speedup)} | "
                     f"{fmt(ev.audit.judge_clock_speedup)} | {'kept' if ev.audit.passed else 'overturned'}: {reason} |")
    return "\n".join(lines) + "\n"


def generation_section(trials: list[Trial]) -> str:
    """report.md's speedup over the generations (issue 37): what each generation evaluated, its best, the best so far
    as a bar against the run's best (audited speeds, where an audit lowered one). Empty for a one-generation run."""
    gens = sorted({t.job.generation for t in trials})
    if len(gens) < 2:
        return ""
    ok = lambda ts: [t.speedup for t in ts if t.ok and t.speedup is not None]  # noqa: E731
    top = max(ok(trials), default=None)
    lines = ["## Speedup by generation", "", "| gen | evaluated | ok | best of the generation | best so far | |",
             "|---|---|---|---|---|---|"]
    fmt = lambda x: "—" if x is None else f"{x:.3f}x"  # noqa: E731
    so_far = None
    for g in gens:
        ts = [t for t in trials if t.job.generation == g and t.evaluation is not None]
        best = max(ok(ts), default=None)
        so_far = best if so_far is None or (best is not None and best > so_far) else so_far
        bar = "█" * max(1, round(20 * so_far / top)) if so_far and top else ""
        lines.append(f"| {g} | {len(ts)} | {len(ok(ts))} | {fmt(best)} | {fmt(so_far)} | {bar} |")
    return "\n".join(lines) + "\n"


def write_results(run: RunFolder, state: RunState, reason: str) -> Result:
    """Write every result file of the run and return the Result.

    An audited candidate's record (candidates/<id>.json) is written again with the audit in it, so an
    overturned winner's file says `rejected` and why, as its trial does.
    """
    r = summarize(run, state, reason)
    for t in state.get("trials", []):
        if t.candidate is not None and t.evaluation is not None and t.evaluation.audit is not None:
            run.save_candidate(t.candidate, t.evaluation)
    best = best_candidate(state.get("trials", []))
    if best is not None and best.candidate is not None:
        slower = "" if r.answer is Answer.IMPROVED else ": SLOWER than PyTorch eager, keep your module"
        header = (f"# kevolve: fastest verified ModelNew for {r.problem} "
                  f"({r.speedup or 0:.2f}x vs eager{slower}), run {r.run_id}, candidate {best.candidate.id}\n")
        run.write_text("best_model.py", header + best.candidate.source)
    run.write_json("lineage.json", [s.model_dump() for s in r.lineage])
    diffs = lineage_diffs(r, state.get("trials", []))
    audits = audit_section(state.get("trials", []))
    gens = generation_section(state.get("trials", []))
    from kevolve.where_time import markdown

    where = markdown(best.evaluation) if best is not None and best.evaluation is not None else ""
    run.write_text("report.md", render_report(r) + (f"\n{where}" if where else "") + (f"\n{gens}" if gens else "")
                   + (f"\n{audits}" if audits else "")
                   + (f"\n## What changed along the lineage\n\n{diffs}" if diffs else ""))
    run.write_text("result.json", r.model_dump_json(indent=1))
    return r
