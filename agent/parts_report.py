"""report.md of an `optimize --parts` run: the whole model's verdict, then each part: its share of eager's time, what
it became, its own speedup; then each composition judged, and the parts dropped from it and why."""

from __future__ import annotations

from kevolve.agent.result import Result
from kevolve.records import Evaluation


def _x(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}x"


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def render(r: Result, dec, ev: Evaluation | None) -> str:  # noqa: ANN001 - a kevolve.parts Decomposition
    """The report (see the module docstring)."""
    verdict = "not judged" if ev is None else f"**{ev.outcome.value}** ({ev.reason})"
    lines = [f"# kevolve run {r.run_id}: {r.problem} in parts", "",
             f"The model was split into {len(dec.parts)} parts, each optimized in a loop of its own (one prompt per "
             "part); the best correct part candidates were composed into one `ModelNew` and judged as the whole model.",
             "", f"Composition as the whole model: {verdict}", "",
             "| whole model | time (ms) | speedup |", "|---|---|---|",
             f"| composed parts | {_ms(r.best_ms)} | |",
             f"| PyTorch eager | {_ms(r.eager_ms)} | {_x(r.speedup)} |",
             f"| torch.compile | {_ms(r.compile_ms)} | {_x(r.speedup_vs_compile)} |", "",
             "## Parts", "",
             "| part | where | module | share of eager (CPU) | became | its speedup | its run |",
             "|---|---|---|---|---|---|---|"]
    for p in r.parts:
        share = "—" if p.share is None else f"{100 * p.share:.1f}%"
        became = f"`{p.candidate_id}`" if p.candidate_id else f"PyTorch ({p.note})" if p.note else "PyTorch"
        became = "PyTorch (dropped from the composition)" if p.dropped else became
        module = p.spelled if len(p.spelled) <= 60 else p.spelled[:57] + "…"
        lines.append(f"| {p.index} | {', '.join(p.paths)} | `{module}` | {share} | {became} | {_x(p.speedup)} | "
                     f"{p.run_id or '—'} |")
    rest = dec.rest_share
    lines += ["", "The rest of the forward stays PyTorch"
              + (f" ({100 * rest:.1f}% of eager's CPU time)" if rest is not None else "")
              + (": " + "; ".join(f"`{k.path}` {k.reason}" for k in dec.kept) if dec.kept else "") + ".", "",
              f"{r.proposals} proposals over the parts' loops, {r.evaluated} evaluations (the composition's included); "
              f"LLM cost ${r.cost_usd:.4f} ({r.prompt_tokens} prompt + {r.completion_tokens} completion tokens); "
              f"{r.elapsed_s:.0f} s; the evaluations held the device {r.device_s:.0f} s.", ""]
    lines += _compositions(r) + [_closing(r)]
    return "\n".join(lines) + "\n"


def plan_table(dec) -> str:  # noqa: ANN001 - a kevolve.parts Decomposition
    """The parts as the run starts on them, for the progress lines: where, module, share, family (a part of the same
    family as an earlier one is tried with that one's winner first)."""
    first: dict[str, int] = {}
    rows = []
    for p in sorted(dec.parts, key=lambda p: -(p.share or 0.0)):
        share = "—" if p.share is None else f"{100 * p.share:5.1f}%"
        kin = first.setdefault(p.family, p.index) if p.family else p.index
        module = p.spelled if len(p.spelled) <= 48 else p.spelled[:45] + "…"
        rows.append(f"  {p.index:>3}  {share:>6}  {', '.join(p.paths)[:30]:<30}  {module}"
                    + (f"  (family of part {kin})" if kin != p.index else ""))
    kept = f"; {len(dec.kept)} submodule(s) stay PyTorch" if dec.kept else ""
    return (f"{dec.problem.name} in {len(dec.parts)} parts{kept}, largest share first:\n"
            f"  part  share  where{' ' * 27}module\n" + "\n".join(rows))


def done_line(part, r: Result | str) -> str:  # noqa: ANN001 - a kevolve.parts Part
    """One part's outcome as its loop ends, for the progress lines."""
    if isinstance(r, str):
        return f"part {part.index} ({', '.join(part.paths)[:40]}): stays PyTorch: {r}"
    if r.best_candidate_id is None:
        return f"part {part.index} ({', '.join(part.paths)[:40]}): no correct candidate ({r.evaluated} evaluated)"
    return (f"part {part.index} ({', '.join(part.paths)[:40]}): {r.best_candidate_id} at {_x(r.speedup)} its eager, "
            f"{_x(r.speedup_vs_compile)} its torch.compile ({r.evaluated} evaluated)")


def _compositions(r: Result) -> list[str]:
    """Each composition judged, where there was more than one, and each dropped part's reason."""
    if len(r.compositions) < 2 and not any(p.dropped for p in r.parts):
        return []
    lines = ["## Compositions judged", "", "A composition judged not ok was tried again with a part fewer, the part "
             "with the least gain (share x (1 - 1/speedup)) dropped first.", "",
             "| # | parts | candidate | verdict |", "|---|---|---|---|"]
    for n, t in enumerate(r.compositions, 1):
        lines.append(f"| {n} | {', '.join(map(str, t.parts))} | {f'`{t.candidate_id}`' if t.candidate_id else '—'} | "
                     f"{t.outcome}: {t.reason[:120]} |")
    lines += [""] + [f"- Part {p.index} ({', '.join(p.paths)}) dropped: {p.dropped}" for p in r.parts if p.dropped]
    return lines + [""]


def _closing(r: Result) -> str:
    if r.best_path is None:
        return f"No composition was correct ({r.stop_reason[:300]}): keep your module."
    return f"{r.message[0].upper()}{r.message[1:]}." if r.speedup and r.speedup > 1 else (
        f"**Nothing beat eager (composition {r.speedup or 0:.2f}x): keep your module.** The composition is in "
        f"`{r.best_path}` for reference.")
