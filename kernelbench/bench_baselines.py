"""`kevolve bench baselines`: fill the baseline cache alone, optionally beside published timings.

Each problem is timed in a fresh timing-only worker (`baseline_worker`: the sandbox's Timer, as in
a bench run, without the float64 truth or outputs) while the next problem's worker starts up. Problems
already cached are skipped unless --refresh, so an interrupted run continues where it stopped.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import statistics
from pathlib import Path

from kevolve.kernelbench.baselines import (Baseline, BaselineCache, device_fingerprint, fits, load_published,
                                           torch_version)
from kevolve.kernelbench.suite import SuiteProblem
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.protocol import WorkerRequest

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
    from kevolve.sandbox.oracle import make_draws

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


class _Ahead:
    """Workers started one problem ahead: the next prepares on `prep` cores while one is timed on `timing`."""

    def __init__(self, problems: list[SuiteProblem], config: SandboxConfig) -> None:
        cores = sorted(os.sched_getaffinity(0))
        self.timing, self.prep = {cores[0]}, set(cores[1:]) or {cores[0]}
        self.problems, self.config, self.i = problems, config, 0
        self.next = self._start(0)

    def _start(self, i: int) -> tuple[object, WorkerRequest] | None:
        from kevolve.kernelbench.baseline_worker import BaselineWorker

        if i >= len(self.problems):
            return None
        req = baseline_request(self.problems[i], self.config)
        return BaselineWorker(self.config.device).prepare(req, self.prep), req

    def time_next(self) -> object:
        """Time the prepared worker (after starting the one after it) and return its exit."""
        from kevolve.kernelbench.baseline_worker import pin_process

        assert self.next is not None
        worker, req = self.next
        self.i += 1
        self.next = self._start(self.i)
        try:
            pin_process(worker.proc.pid, self.timing)  # type: ignore[attr-defined]
            return worker.run(req, self.config.timeout_s, self.config.memory_limit_gb)  # type: ignore[attr-defined]
        finally:
            worker.kill()  # type: ignore[attr-defined]
            shutil.rmtree(worker.scratch, ignore_errors=True)  # type: ignore[attr-defined]

    def close(self) -> None:
        if self.next is not None:
            self.next[0].kill()  # type: ignore[attr-defined]
            shutil.rmtree(self.next[0].scratch, ignore_errors=True)  # type: ignore[attr-defined]


def _ratio_summary(ratios: list[float]) -> dict[str, float | int]:
    if not ratios:
        return {"n": 0}
    return {"n": len(ratios), "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "within_5pct": sum(abs(r - 1) <= 0.05 for r in ratios),
            "within_10pct": sum(abs(r - 1) <= 0.10 for r in ratios),
            "within_25pct": sum(abs(r - 1) <= 0.25 for r in ratios)}


def run_baselines(problems: list[SuiteProblem], config: SandboxConfig, refresh: bool, published: Path | None,
                  out: Path | None) -> int:
    from kevolve.kernelbench.console import console

    fingerprint = device_fingerprint(config.device)
    cache = BaselineCache(config.cache_dir / "baselines")
    pub_eager, pub_compile = _published(published)
    rows: list[dict[str, object]] = [{"level": sp.level, "file": sp.file, "error": sp.unavailable}
                                     for sp in problems if sp.problem is None or sp.unavailable]
    usable = [sp for sp in problems if sp.problem is not None and not sp.unavailable]
    cached: dict[str, Baseline] = {}
    for sp in usable:
        b = None if refresh else cache.get(fingerprint, torch_version(), sp.problem.id)  # type: ignore[union-attr]
        if b is not None and fits(b, config):
            cached[sp.problem.id] = b  # type: ignore[union-attr]
    todo = [sp for sp in usable if sp.problem.id not in cached]  # type: ignore[union-attr]
    ahead = _Ahead(todo, config)
    try:
        for i, sp in enumerate(usable):
            assert sp.problem is not None
            b: Baseline | str | None = cached.get(sp.problem.id)
            if b is None:
                b = to_baseline(sp, ahead.time_next(), config, fingerprint)
                if isinstance(b, Baseline):
                    cache.put(b)
            rows.append(_row(sp, b, pub_eager, pub_compile, sp.problem.id not in cached))
            console.print(_line(i + 1, len(usable), rows[-1]), highlight=False)
    finally:
        ahead.close()
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


__all__ = ["baseline_request", "baselines_markdown", "run_baselines", "to_baseline"]
