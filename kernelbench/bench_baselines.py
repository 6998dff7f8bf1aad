"""`kevolve bench baselines`: fill the baseline cache alone, optionally beside published timings.

Each problem is timed in a fresh timing-only worker (`baseline_worker`: the sandbox's Timer, as in
a bench run, without the float64 truth or outputs) while the next problem's worker starts up. Problems
already cached are skipped unless --refresh, so an interrupted run continues where it stopped.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import statistics
from pathlib import Path

from kevolve.kernelbench.baselines import (Baseline, BaselineCache, device_fingerprint, fits, load_published,
                                           torch_version)
from kevolve.kernelbench.suite import SuiteProblem
from kevolve.sandbox.config import SandboxConfig

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


def measure(sp: SuiteProblem, config: SandboxConfig, worker: object, fingerprint: str) -> Baseline | str:
    """Run the reference task on a started worker; a Baseline, or a one-line reason it failed."""
    from kevolve.sandbox.local import make_draws
    from kevolve.sandbox.protocol import WorkerRequest

    assert sp.problem is not None
    req = WorkerRequest(task="reference", problem_source=sp.problem.source, device=config.device,
                        init_seed=config.seed or 0, draws=make_draws(config.seed or 0, config.n_draws),
                        trials=config.trials, max_timing_s=config.max_timing_s, warmup=config.warmup,
                        time_compile=config.want_compile_baseline, profile=False, cache_dir=str(config.cache_dir))
    done = worker.run(req, config.timeout_s, config.memory_limit_gb)  # type: ignore[attr-defined]
    r = done.report
    if r is None or r.status != "done" or r.timing is None:
        why = r.reason if r is not None else ("timeout" if done.timed_out else f"worker died during {done.phase}")
        return f"problem_error: {why}"[:300]
    note = "" if r.compile_timing is not None or not config.want_compile_baseline else (r.log_tail or "failed")[:300]
    return Baseline(problem_id=sp.problem.id, problem_name=sp.problem.name, level=sp.level, device=fingerprint,
                    device_name=r.device_name, torch=torch_version(), eager=r.timing, compiled=r.compile_timing,
                    compile_note=note, trials=config.trials, max_timing_s=config.max_timing_s,
                    measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))


def _ratio_summary(ratios: list[float]) -> dict[str, float | int]:
    if not ratios:
        return {"n": 0}
    return {"n": len(ratios), "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "within_5pct": sum(abs(r - 1) <= 0.05 for r in ratios),
            "within_10pct": sum(abs(r - 1) <= 0.10 for r in ratios),
            "within_25pct": sum(abs(r - 1) <= 0.25 for r in ratios)}


def run_baselines(problems: list[SuiteProblem], config: SandboxConfig, refresh: bool, published: Path | None,
                  out: Path | None) -> int:
    from kevolve.kernelbench.baseline_worker import BaselineWorker as WorkerProcess
    from kevolve.kernelbench.console import console

    fingerprint = device_fingerprint(config.device)
    cache = BaselineCache(config.cache_dir / "baselines")
    pub_eager, pub_compile = _published(published)
    rows: list[dict[str, object]] = []
    todo = [sp for sp in problems if sp.problem is not None and not sp.unavailable]
    for sp in problems:
        if sp.problem is None or sp.unavailable:
            rows.append({"level": sp.level, "file": sp.file, "error": sp.unavailable})
    spare = None
    for i, sp in enumerate(todo):
        assert sp.problem is not None
        b: Baseline | str | None = None if refresh else cache.get(fingerprint, torch_version(), sp.problem.id)
        if b is not None and not fits(b, config):  # type: ignore[arg-type]
            b = None
        fresh = b is None
        if fresh:
            worker = spare or WorkerProcess(config.device).start()
            spare = WorkerProcess(config.device).start() if i + 1 < len(todo) else None  # warms up meanwhile
            try:
                b = measure(sp, config, worker, fingerprint)
            finally:
                worker.kill()
                shutil.rmtree(worker.scratch, ignore_errors=True)
            if isinstance(b, Baseline):
                cache.put(b)
        rows.append(_row(sp, b, pub_eager, pub_compile, fresh))  # type: ignore[arg-type]
        console.print(_line(i + 1, len(todo), rows[-1]), highlight=False)
    if spare is not None:
        spare.kill()
        shutil.rmtree(spare.scratch, ignore_errors=True)
    summary = {f"level{lv}": {"eager": _ratio_summary([r["ratio_eager"] for r in rows  # type: ignore[misc]
                                                        if r.get("level") == lv and r.get("ratio_eager")]),
                              "compile": _ratio_summary([r["ratio_compile"] for r in rows  # type: ignore[misc]
                                                          if r.get("level") == lv and r.get("ratio_compile")])}
               for lv in sorted({sp.level for sp in problems})}
    console.print_json(json.dumps(summary))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"device": fingerprint, "torch": torch_version(), "trials": config.trials,
                                   "max_timing_s": config.max_timing_s, "summary": summary, "problems": rows},
                                  indent=1))
        out.with_suffix(".md").write_text(baselines_markdown(fingerprint, summary, rows))
        console.print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0 if all("error" not in r for r in rows) else 1


def baselines_markdown(device: str, summary: dict, rows: list[dict[str, object]]) -> str:
    """The ratio distribution per level, then every problem: for docs/BENCHMARKS.md."""
    f = lambda x, p="{:.3g}": "—" if x is None else p.format(x)  # noqa: E731
    out = [f"Baselines on {device}, torch {torch_version()}: measured mean / published mean.", "",
           "| level | timing | n | median ratio | min | max | within ±5% | ±10% | ±25% |", "|---|---|---|---|---|---|---|---|---|"]
    for lv, kinds in summary.items():
        for kind, s in kinds.items():
            if s.get("n"):
                out.append(f"| {lv} | {kind} | {s['n']} | {s['median']:.3f} | {s['min']:.3f} | {s['max']:.3f} | "
                           f"{s['within_5pct']} | {s['within_10pct']} | {s['within_25pct']} |")
    out += ["", "| level | problem | eager ms (median) | eager ms (mean) | published | ratio | compile ms (mean) | "
                "published | ratio |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['level']} | {r['file']} | {str(r['error'])[:80]} | | | | | | |")
            continue
        out.append(f"| {r['level']} | {r['file']} | {f(r['eager_median_ms'])} | {f(r['eager_mean_ms'])} | "
                   f"{f(r['published_eager_ms'])} | {f(r['ratio_eager'], '{:.3f}')} | {f(r['compile_mean_ms'])} | "
                   f"{f(r['published_compile_ms'])} | {f(r['ratio_compile'], '{:.3f}')} |")
    return "\n".join(out) + "\n"


def _row(sp: SuiteProblem, b: Baseline | str, pub_eager: dict, pub_compile: dict, fresh: bool) -> dict[str, object]:
    row: dict[str, object] = {"level": sp.level, "file": sp.file, "problem_id": sp.problem.id if sp.problem else None}
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
    if "error" in r:
        return f"[{i}/{n}] L{r['level']}/{r['file']}: {r['error']}"
    f = lambda x: "—" if x is None else f"{x:.4g}"  # noqa: E731
    return (f"[{i}/{n}] L{r['level']}/{r['file']}: eager {f(r['eager_median_ms'])} ms, compile "
            f"{f(r['compile_median_ms'])} ms, published {f(r['published_eager_ms'])} / "
            f"{f(r['published_compile_ms'])} ms, ratio {f(r['ratio_eager'])} / {f(r['ratio_compile'])}"
            f"{'' if r['measured'] else ' (cached)'}")


__all__ = ["measure", "run_baselines"]
