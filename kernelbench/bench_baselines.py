"""`kevolve bench baselines`: fill the baseline cache alone, optionally beside published timings.

Each problem is timed in a fresh timing-only worker (`baseline_worker`: the sandbox's Timer, as in
a bench run, without the float64 truth or outputs). Several workers start up, set their problems up
and compile the torch.compile baseline at once (`--jobs`); one at a time is timed
(sandbox/parent/baseline_pool.py). Each result goes into the cache as it comes, and problems already
cached are skipped unless --refresh, so an interrupted run (or one stopped by --time-limit-s)
continues where it stopped.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import statistics
from collections.abc import Iterator
from pathlib import Path

from kevolve.kernelbench.baselines import (Baseline, BaselineCache, device_fingerprint, fits, load_published,
                                           torch_version)
from kevolve.sandbox.parent.baseline_pool import PoolSettings
from kevolve.kernelbench.suite import SuiteProblem
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.common.protocol import WorkerRequest

log = logging.getLogger(__name__)

PUBLISHED_EAGER = "baseline_time_torch.json"
PUBLISHED_COMPILE = "baseline_time_torch_compile_inductor_default.json"


def _published(path: Path | None) -> tuple[dict[tuple[int, str], float], dict[tuple[int, str], float]]:
    if path is None:
        return {}, {}
    if path.is_file():
        return load_published(path), {}
    eager = path / PUBLISHED_EAGER
    comp = path / PUBLISHED_COMPILE
    return (load_published(eager) if eager.exists() else {}), (load_published(comp) if comp.exists() else {})


def baseline_request(sp: SuiteProblem, config: SandboxConfig) -> WorkerRequest:
    from kevolve.sandbox.judge.oracle import make_draws

    assert sp.problem is not None
    return WorkerRequest(task="reference", problem_source=sp.problem.source, device=config.device,
                         init_seed=config.seed or 0, draws=make_draws(config.seed or 0, config.n_draws),
                         trials=config.trials, max_timing_s=config.max_timing_s, warmup=config.warmup,
                         time_compile=config.want_compile_baseline, profile=False, cache_dir=str(config.cache_dir))


def to_baseline(sp: SuiteProblem, done: object, config: SandboxConfig, fingerprint: str) -> Baseline | str:
    """A worker's exit as a Baseline, or a one-line reason it failed."""
    assert sp.problem is not None
    r = done.report  # type: ignore[attr-defined]
    if r is None or r.status != "done" or r.timing is None:
        why = r.reason if r is not None else ("timeout" if done.timed_out  # type: ignore[attr-defined]
                                             else f"worker died during {done.phase}")  # type: ignore[attr-defined]
        return f"problem_error: {why}"[:300]
    note = "" if r.compile_timing is not None or not config.want_compile_baseline else (r.log_tail or "failed")[:300]
    return Baseline(problem_id=sp.problem.id, problem_name=sp.problem.name, level=sp.level, device=fingerprint,
                    device_name=r.device_name, torch=torch_version(), eager=r.timing, compiled=r.compile_timing,
                    compile_note=note, trials=config.trials, max_timing_s=config.max_timing_s,
                    measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))


def out_of_memory(b: Baseline) -> bool:
    """torch.compile failed for want of device memory: with other problems preparing beside it that
    says little about the problem, so the baseline is shown but not cached (the next run retries)."""
    note = b.compile_note.lower()
    return b.compiled is None and ("outofmemory" in note or "out of memory" in note)


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[1], q[2]


def _ratio_summary(ratios: list[float]) -> dict[str, float | int]:
    """The distribution of measured / published: n, quartiles, extremes, how many land close."""
    if not ratios:
        return {"n": 0}
    q1, med, q3 = _quartiles(ratios)
    return {"n": len(ratios), "median": med, "q1": q1, "q3": q3, "min": min(ratios), "max": max(ratios),
            "within_5pct": _within(ratios, 0.05), "within_10pct": _within(ratios, 0.10),
            "within_25pct": _within(ratios, 0.25)}


def _within(ratios: list[float], tol: float) -> int:
    """How many ratios lie within 1 ± tol (a ratio of exactly 1.1 is within 10%: float slack allowed)."""
    return sum(abs(r - 1) <= tol + 1e-9 for r in ratios)


def _summary(rows: list[dict[str, object]], levels: list[int]) -> dict[str, dict[str, dict[str, float | int]]]:
    return {f"level{lv}": {kind: _ratio_summary([r[f"ratio_{kind}"] for r in rows  # type: ignore[misc]
                                                 if r.get("level") == lv and r.get(f"ratio_{kind}")])
                           for kind in ("eager", "compile")}
            for lv in levels}


def _measure(todo: list[SuiteProblem], config: SandboxConfig, settings: PoolSettings,
             fingerprint: str) -> Iterator[tuple[SuiteProblem, Baseline | str | None, dict[str, object]]]:
    """Each problem of `todo` as it finishes: (problem, its baseline, why not, or None if pending; when its
    worker started and when it was timed, wall clock)."""
    from kevolve.sandbox.parent.baseline_pool import BaselinePool

    pool = BaselinePool([(sp, baseline_request(sp, config)) for sp in todo], config, settings)
    for res in pool.results():
        when: dict[str, object] = {"worker_started": res.spawned_at, "timed_window": None}
        if res.pending:
            yield res.problem, None, when
        elif res.exit is None:
            yield res.problem, res.failure, when
        else:
            r = res.exit.report
            when["timed_window"] = r.timed_window if r else None
            yield res.problem, to_baseline(res.problem, res.exit, config, fingerprint), when


def run_baselines(problems: list[SuiteProblem], config: SandboxConfig, refresh: bool, published: Path | None,
                  out: Path | None, settings: PoolSettings | None = None) -> int:
    """Measure what the cache lacks, print each problem and the per-level comparison; exit code:
    0 all measured, 1 some problem failed, 3 stopped at the time limit with problems left (run again)."""
    from kevolve.kernelbench.console import console

    settings = settings or PoolSettings()
    fingerprint = device_fingerprint(config.device)
    cache = BaselineCache(config.cache_dir / "baselines")
    pub = _published(published)
    rows: list[dict[str, object]] = [{"level": sp.level, "file": sp.file, "error": sp.unavailable}
                                     for sp in problems if sp.problem is None or sp.unavailable]
    usable = [sp for sp in problems if sp.problem is not None and not sp.unavailable]
    cached: dict[str, Baseline] = {}
    for sp in usable:
        b = None if refresh else cache.get(fingerprint, torch_version(), sp.problem.id)  # type: ignore[union-attr]
        if b is not None and fits(b, config):
            cached[sp.problem.id] = b  # type: ignore[union-attr]
    by_id: dict[str, dict[str, object]] = {}
    for sp in usable:
        if sp.problem.id in cached:  # type: ignore[union-attr]
            by_id[sp.problem.id] = _row(sp, cached[sp.problem.id], *pub, fresh=False)  # type: ignore[union-attr]
            console.print(_line(len(by_id), len(usable), by_id[sp.problem.id]), highlight=False)  # type: ignore[union-attr]
    todo = [sp for sp in usable if sp.problem.id not in cached]  # type: ignore[union-attr]
    log.info("%d cached, %d to measure, %d at once", len(cached), len(todo), settings.jobs)
    for sp, b, when in _measure(todo, config, settings, fingerprint):
        assert sp.problem is not None
        if isinstance(b, Baseline) and not out_of_memory(b):
            cache.put(b)
        row = _row(sp, b, *pub, fresh=True) | when
        by_id[sp.problem.id] = row
        if b is not None:  # the pending ones are counted once, below
            console.print(_line(len(by_id), len(usable), row), highlight=False)
    rows += [by_id[sp.problem.id] for sp in usable]  # type: ignore[union-attr]
    summary = _summary(rows, sorted({sp.level for sp in problems}))
    _write(out, fingerprint, config, summary, rows)
    pending = sum(bool(r.get("pending")) for r in rows)
    console.print(summary_markdown(fingerprint, summary), highlight=False, soft_wrap=True)
    if pending:
        console.print(f"{pending} problem(s) not measured yet (time limit): run the same command again to continue")
        return 3
    return 0 if all("error" not in r for r in rows) else 1


def _write(out: Path | None, fingerprint: str, config: SandboxConfig, summary: dict, rows: list[dict]) -> None:
    from kevolve.kernelbench.console import console

    if out is None:
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": fingerprint, "torch": torch_version(), "trials": config.trials,
                               "max_timing_s": config.max_timing_s, "summary": summary, "problems": rows},
                              indent=1))
    out.with_suffix(".md").write_text(baselines_markdown(fingerprint, summary, rows))
    console.print(f"wrote {out} and {out.with_suffix('.md')}")


def summary_markdown(device: str, summary: dict) -> str:
    """Per level and timing: n, the quartiles and extremes of measured / published, how many within ±5/10/25%."""
    out = [f"Baselines on {device}, torch {torch_version()}: measured mean / published mean.", "",
           "| level | timing | n | median ratio | q1 | q3 | min | max | within ±5% | ±10% | ±25% |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for lv, kinds in summary.items():
        for kind, s in kinds.items():
            if s.get("n"):
                out.append(f"| {lv} | {kind} | {s['n']} | {s['median']:.3f} | {s['q1']:.3f} | {s['q3']:.3f} | "
                           f"{s['min']:.3f} | {s['max']:.3f} | {s['within_5pct']} | {s['within_10pct']} | "
                           f"{s['within_25pct']} |")
    if len(out) == 4:
        out.append("| — | no problem has both a measured and a published timing | | | | | | | | | |")
    return "\n".join(out) + "\n"


def baselines_markdown(device: str, summary: dict, rows: list[dict[str, object]]) -> str:
    """The ratio distribution per level, then every problem: for docs/BENCHMARKS.md."""
    f = lambda x, p="{:.3g}": "—" if x is None else p.format(x)  # noqa: E731
    out = [summary_markdown(device, summary).rstrip("\n")]
    out += ["", "| level | problem | eager ms (median) | eager ms (mean) | published | ratio | compile ms (mean) | "
                "published | ratio |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r or r.get("pending"):
            why = "not measured yet (time limit)" if r.get("pending") else str(r["error"])[:80]
            out.append(f"| {r['level']} | {r['file']} | {why} | | | | | | |")
            continue
        out.append(f"| {r['level']} | {r['file']} | {f(r['eager_median_ms'])} | {f(r['eager_mean_ms'])} | "
                   f"{f(r['published_eager_ms'])} | {f(r['ratio_eager'], '{:.3f}')} | {f(r['compile_mean_ms'])} | "
                   f"{f(r['published_compile_ms'])} | {f(r['ratio_compile'], '{:.3f}')} |")
    return "\n".join(out) + "\n"


def _row(sp: SuiteProblem, b: Baseline | str | None, pub_eager: dict, pub_compile: dict,
         fresh: bool) -> dict[str, object]:
    row: dict[str, object] = {"level": sp.level, "file": sp.file, "problem_id": sp.problem.id if sp.problem else None}
    if b is None:
        row["pending"] = True
        return row
    if isinstance(b, str):
        row["error"] = b
        return row
    pe, pc = pub_eager.get((sp.level, sp.file)), pub_compile.get((sp.level, sp.file))
    row.update(eager_median_ms=b.eager.median_ms, eager_mean_ms=b.eager.mean_ms, eager_trials=b.eager.trials,
               compile_median_ms=b.compiled.median_ms if b.compiled else None,
               compile_mean_ms=b.compiled.mean_ms if b.compiled else None, compile_note=b.compile_note,
               published_eager_ms=pe, published_compile_ms=pc, measured=fresh, measured_at=b.measured_at,
               ratio_eager=b.eager.mean_ms / pe if pe else None,
               ratio_compile=b.compiled.mean_ms / pc if pc and b.compiled else None)
    return row


def _line(i: int, n: int, r: dict[str, object]) -> str:
    if r.get("pending"):
        return f"[{i}/{n}] L{r['level']}/{r['file']}: not measured yet (time limit)"
    if "error" in r:
        return f"[{i}/{n}] L{r['level']}/{r['file']}: {r['error']}"
    f = lambda x: "—" if x is None else f"{x:.4g}"  # noqa: E731
    return (f"[{i}/{n}] L{r['level']}/{r['file']}: eager {f(r['eager_median_ms'])} ms, compile "
            f"{f(r['compile_median_ms'])} ms, published {f(r['published_eager_ms'])} / "
            f"{f(r['published_compile_ms'])} ms, ratio {f(r['ratio_eager'])} / {f(r['ratio_compile'])}"
            f"{'' if r['measured'] else ' (cached)'}")


__all__ = ["baseline_request", "baselines_markdown", "out_of_memory", "run_baselines", "summary_markdown",
           "to_baseline"]
