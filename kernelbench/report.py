"""A run's reports: results.json, report.md, report.html (inline SVG plots), the terminal table."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from kevolve.kernelbench.metrics import LevelSummary, ProblemResult, problem_results, summarize
from kevolve.kernelbench.store import RunStore


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def _fast(d: dict[str, float] | None) -> str:
    if d is None:
        return "n/a"
    return " / ".join(f"{v:.0f}" for v in d.values())


def level_table_rows(s: LevelSummary) -> list[str]:
    """Cells of the per-level table, in the order of LEVEL_HEADERS."""
    outcomes = ", ".join(f"{k} {v}" for k, v in s.outcomes.items())
    return [f"{s.level}", f"{s.solved}/{s.problems}", f"{s.correct_pct:.0f}%", _fast(s.fast_eager),
            _fast(s.fast_compile), _f(s.geomean_speedup, "{:.2f}x"), _f(s.geomean_speedup_vs_compile, "{:.2f}x"),
            outcomes]


LEVEL_HEADERS = ["level", "solved", "correct", "fast_0/1/1.5/2 vs eager %", "fast_0/1/1.5/2 vs compile %",
                 "geomean", "geomean vs compile", "outcomes"]
PROBLEM_HEADERS = ["level", "problem", "status", "best", "speedup", "vs compile", "ms", "eager ms",
                   "compile ms", "reason"]


def problem_cells(p: ProblemResult) -> list[str]:
    return [str(p.level), p.name, p.status, p.best_label, _f(p.speedup, "{:.2f}x"),
            _f(p.speedup_vs_compile, "{:.2f}x"), _f(p.runtime_ms, "{:.4g}"), _f(p.eager_ms, "{:.4g}"),
            _f(p.compile_ms, "{:.4g}"), p.reason[:120] if p.status != "ok" else
            (f"no torch.compile time: {p.compile_note}"[:120] if p.compile_ms is None and p.compile_note else "")]


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    esc = lambda c: c.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def results_json(store: RunStore) -> dict[str, Any]:
    rows = store.rows()
    meta = store.meta()
    return {"run": meta.model_dump(mode="json"),
            "levels": [s.model_dump(mode="json") for s in summarize(rows)],
            "problems": [p.model_dump(mode="json") for p in problem_results(rows)],
            "evaluations": [r.model_dump(mode="json", exclude={"evaluation"}) for r in rows]}


def render_markdown(data: dict[str, Any]) -> str:
    meta = data["run"]
    levels = [LevelSummary.model_validate(s) for s in data["levels"]]
    probs = [ProblemResult.model_validate(p) for p in data["problems"]]
    out = [f"# kevolve bench: {meta['name']}", "",
           f"Suite `{meta['suite']}`, levels {', '.join(map(str, meta['levels']))}, solutions "
           f"`{meta.get('solutions') or '-'}`, device {meta['device_fingerprint']} ({', '.join(meta['devices'])}), "
           f"torch {meta['torch']}, seed {meta['seed']}, executor {meta['executor']}.", "",
           "fast_p: share of all selected problems with a correct candidate more than p times faster than "
           "the baseline (fast_0 = correct). geomean: over solved problems, best candidate each.", "",
           _md_table(LEVEL_HEADERS, [level_table_rows(s) for s in levels]), "", "## Problems", "",
           _md_table(PROBLEM_HEADERS, [problem_cells(p) for p in probs]), ""]
    return "\n".join(out)


def _svg_hist(speedups: list[float], title: str) -> str:
    """Histogram of log2 speedups (bins of half a power of two), as an inline SVG."""
    if not speedups:
        return f"<p>{html.escape(title)}: no correct candidates.</p>"
    # always span 0.5x..2x at least, so that a lone bar does not fill the plot and 1x is on the axis
    lo = min(-1.0, math.floor(min(math.log2(s) for s in speedups) * 2) / 2)
    hi = max(1.0, math.ceil(max(math.log2(s) for s in speedups) * 2) / 2)
    nb = int(round((hi - lo) / 0.5))
    counts = [0] * nb
    for s in speedups:
        counts[min(nb - 1, int((math.log2(s) - lo) / 0.5))] += 1
    w, h, pad = 520, 220, 36
    bw = (w - 2 * pad) / nb
    top = max(counts)
    bars = []
    for i, c in enumerate(counts):
        bh = (h - 2 * pad) * c / top
        x, y = pad + i * bw, h - pad - bh
        color = "#2a9d8f" if lo + (i + 0.5) * 0.5 > 0 else "#e76f51"
        bars.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw - 2:.1f}" height="{bh:.1f}" fill="{color}">'
                    f"<title>{2 ** (lo + i * 0.5):.2f}x–{2 ** (lo + (i + 1) * 0.5):.2f}x: {c}</title></rect>")
        if c:
            bars.append(f'<text x="{x + bw / 2 - 4:.1f}" y="{y - 3:.1f}" font-size="10">{c}</text>')
        if i % max(1, nb // 8) == 0:
            bars.append(f'<text x="{x:.1f}" y="{h - pad + 14}" font-size="10">{2 ** (lo + i * 0.5):.2g}x</text>')
    one = pad + (0 - lo) / 0.5 * bw
    bars.append(f'<line x1="{one:.1f}" y1="{pad - 10}" x2="{one:.1f}" y2="{h - pad}" stroke="#333" '
                f'stroke-dasharray="4 3"><title>1x</title></line>')
    return (f'<figure><svg width="{w}" height="{h}" role="img" aria-label="{html.escape(title)}">'
            f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#333"/>{"".join(bars)}'
            f"</svg><figcaption>{html.escape(title)} (log scale; green = faster than baseline)</figcaption></figure>")


def _svg_bars(probs: list[ProblemResult], title: str) -> str:
    """Per-problem best speedup vs eager on a log axis; unsolved problems are grey stubs."""
    if not probs:
        return ""
    row_h, w, left = 16, 640, 220
    h = row_h * len(probs) + 30
    vals = [p.speedup for p in probs if p.speedup]
    span = max([abs(math.log2(v)) for v in vals] + [1.0])
    mid = left + (w - left) / 2
    scale = (w - left - 20) / 2 / span
    items = [f'<line x1="{mid}" y1="0" x2="{mid}" y2="{h - 20}" stroke="#333"/>']
    for i, p in enumerate(probs):
        y = i * row_h + 4
        items.append(f'<text x="{left - 6}" y="{y + 11}" font-size="11" text-anchor="end">'
                     f"L{p.level} {html.escape(p.name[:30])}</text>")
        if p.speedup:
            lv = math.log2(p.speedup) * scale
            x, bw = (mid, lv) if lv >= 0 else (mid + lv, -lv)
            color = "#2a9d8f" if lv >= 0 else "#e76f51"
            items.append(f'<rect x="{x:.1f}" y="{y}" width="{max(bw, 1):.1f}" height="{row_h - 4}" fill="{color}">'
                         f"<title>{p.speedup:.3f}x</title></rect>")
        else:
            items.append(f'<text x="{mid + 4}" y="{y + 11}" font-size="10" fill="#888">{html.escape(p.status)}</text>')
    return (f'<figure><svg width="{w}" height="{h}" role="img" aria-label="{html.escape(title)}">{"".join(items)}'
            f"</svg><figcaption>{html.escape(title)} (log scale, centre = 1x)</figcaption></figure>")


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(data: dict[str, Any]) -> str:
    meta = data["run"]
    levels = [LevelSummary.model_validate(s) for s in data["levels"]]
    probs = [ProblemResult.model_validate(p) for p in data["problems"]]
    plots = []
    for s in levels:
        ps = [p for p in probs if p.level == s.level]
        plots.append(_svg_hist([p.speedup for p in ps if p.speedup], f"Level {s.level}: best speedup vs eager"))
        plots.append(_svg_bars(ps, f"Level {s.level}: per-problem best speedup vs eager"))
    style = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
             "margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}"
             "th{background:#f0f0f0}figure{display:inline-block;margin:1em}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>kevolve bench {html.escape(meta['name'])}"
            f"</title><style>{style}</style></head><body><h1>kevolve bench: {html.escape(meta['name'])}</h1>"
            f"<p>Suite <code>{html.escape(meta['suite'])}</code>, device {html.escape(meta['device_fingerprint'])}, "
            f"torch {html.escape(meta['torch'])}, seed {meta['seed']}, executor {html.escape(meta['executor'])}.</p>"
            f"{_html_table(LEVEL_HEADERS, [level_table_rows(s) for s in levels])}{''.join(plots)}<h2>Problems</h2>"
            f"{_html_table(PROBLEM_HEADERS, [problem_cells(p) for p in probs])}</body></html>")


def write_reports(store: RunStore) -> dict[str, Path]:
    data = results_json(store)
    paths = {"results.json": store.write_json("results.json", data)}
    for name, text in (("report.md", render_markdown(data)), ("report.html", render_html(data))):
        path = store.root / name
        path.write_text(text)
        paths[name] = path
    return paths


__all__ = ["LEVEL_HEADERS", "PROBLEM_HEADERS", "level_table_rows", "problem_cells", "render_html",
           "render_markdown", "results_json", "write_reports"]
