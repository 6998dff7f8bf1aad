"""Throughput: `kevolve bench` against KernelBench's own harness, on the same candidates (GPU).

    python3 scripts/bench_throughput.py --kernelbench runs/kernelbench-upstream --out $OUT/throughput
    python3 scripts/bench_throughput.py --kernelbench runs/lbmix/kernelbench --solutions runs/lbmix/solutions \
        --kb-subset runs/lbmix/kb_subset.txt --dry-run      (issue 36's set: scripts/gpu_leaderboard_mix.sh runs it)

Phases (each fits one 10-minute device call; default: all of them):
  kevolve      `kevolve bench` over the solution set (every level its samples name), cold (empty build and baseline
               caches; phase kevolve-cold) and then warm (a second run on the same caches; kevolve-warm). An
               infra_error row is the machine's, not a verdict, and is not counted as an evaluation.
  kernelbench  KernelBench's harness as `scripts/eval_from_generations.py` runs it by default: each
               sample in a fresh process (`eval_kernel_against_ref`, 5 correctness trials, 100 timed
               trials, CUDA events; compile inside the evaluation, `build_cache=False`), one after the
               other. With --kb-build-cache, its CPU pre-compile pool (`build_compile_cache`) first.
               Finished samples are kept in WORK/kernelbench.jsonl; time is the sum of per-sample walls.
               With --kb-subset, only the samples it lists (fixed before the run: the harness's ~71 s an
               evaluation on the H100 fits few in a call); a sample the phase's budget cuts is not recorded.
  report       WORK/throughput.json and throughput.md: evaluations per GPU-minute, the ratio (seconds per
               evaluation, each harness over what it evaluated), kevolve's per-phase table (`--timings`' rows,
               set-up counted once per problem), its time outside evaluations (the run folder's timeline.jsonl:
               build service, the lane's waits for builds, references, the start until the first evaluation), and
               both harnesses' verdicts and timings per candidate.
--dry-run checks the samples, their problems in the suite, the harness's import, and prints the bench command.

The KernelBench checkout is only read (its src/ put on sys.path); modules it imports for LLM calls
(openai, litellm, dotenv, tqdm, requests) are stubbed when absent, as the evaluation never uses them.
KernelBench's `runtime` and `ref_runtime` are milliseconds (its timing.get_timing_stats; the field comments say us).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import time
import types
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_RE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")


def samples(solutions: Path, only: set[int] | None = None, max_samples: int | None = None) -> list[tuple[int, int, int, Path]]:
    out = []
    for p in sorted(solutions.glob("level_*_problem_*_sample_*_kernel.py")):
        m = SAMPLE_RE.match(p.name)
        if m and (not only or int(m.group(2)) in only) and (max_samples is None or int(m.group(3)) < max_samples):
            out.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), p))
    return sorted(out)


def chosen(args: argparse.Namespace) -> list[tuple[int, int, int, Path]]:
    return samples(args.solutions, args.only, args.max_samples)


def problem_file(kb: Path, level: int, number: int) -> Path:
    for base in (kb / "KernelBench", kb):
        hits = list((base / f"level{level}").glob(f"{number}_*.py"))
        if hits:
            return hits[0]
    raise SystemExit(f"error: no level{level} problem {number} under {kb}")


# ---------------------------------------------------------------- kevolve

def bench_cmd(args: argparse.Namespace, work: Path, run_dir: Path, cache: Path) -> list[str]:
    """The `kevolve bench` command over the chosen samples (copied into WORK/chosen-solutions when a subset)."""
    picked = chosen(args)
    nums = sorted({n for _, n, _, _ in picked})
    levels = sorted({lv for lv, _, _, _ in picked}) or [1]
    solutions = args.solutions
    if args.only or args.max_samples is not None:  # bench reads a folder: the chosen samples only
        solutions = work / "chosen-solutions"
        shutil.rmtree(solutions, ignore_errors=True)
        solutions.mkdir(parents=True)
        for *_, p in picked:
            shutil.copy(p, solutions / p.name)
    # -P: the repository root is the working directory, and its kevolve/ folder is not the package
    cmd = [sys.executable, "-P", "-m", "kevolve.cli", "bench", "--suite", str(args.kernelbench),
           "--level", ",".join(map(str, levels)),
           "--problems", ",".join(map(str, nums)), "--solutions", str(solutions), "--device", args.device,
           "--run-dir", str(run_dir), "--cache-dir", str(cache), "--compile-baseline", "off", "--seed", "42"]
    if args.gpus:
        cmd += ["--gpus", args.gpus]
    return cmd + args.bench_arg


def run_kevolve(args: argparse.Namespace, work: Path, tag: str, fresh_cache: bool) -> dict:
    cache, run_dir = work / "kevolve-cache", work / f"kevolve-{tag}"
    if fresh_cache:
        shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = bench_cmd(args, work, run_dir, cache)
    t0 = time.monotonic()
    # its own session: a budget that runs out stops the whole bench (runners, build service) and the
    # evaluations finished by then are reported, not lost
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=args.budget_s)
        rc: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        log, _ = proc.communicate()
        rc = f"stopped after --budget-s {args.budget_s:g}"
    wall, ended = time.monotonic() - t0, time.time()
    (work / f"kevolve-{tag}.log").write_text(log)
    from kevolve.kernelbench import timeline
    from kevolve.kernelbench.store import ResultRow
    from kevolve.report import phase_summary

    rows = []
    for line in (run_dir / "results.jsonl").read_text().splitlines() if (run_dir / "results.jsonl").exists() else []:
        try:
            rows.append(ResultRow.model_validate_json(line))
        except ValueError:  # the last line, cut by the budget's kill
            pass
    cands = [x for x in rows if x.candidate_id]
    evals = [x for x in cands if x.finished]  # an infra_error is the machine's, not a verdict: not counted
    res = {"tag": tag, "wall_s": wall, "returncode": rc, "evaluations": len(evals), "infra_errors": len(cands) - len(evals),
           "bench_args": args.bench_arg, "fused_compare": os.environ.get("KEVOLVE_FUSED_COMPARE", "1") != "0",
           "gpus": len(args.gpus.split(",")) if args.gpus else 1,
           "statuses": dict(Counter(x.status for x in cands).most_common()),
           "phases": phase_summary([x.evaluation for x in evals if x.evaluation is not None]),
           # outside evaluations: build service, waits, references, the start (the bench's timeline.jsonl)
           "timeline": timeline.summary(timeline.read(run_dir / timeline.FILE), ended_unix=ended),
           "per_candidate": {f"{x.level}/{x.number}/{x.label.removeprefix('sample_')}": {
               "status": x.status, "reason": x.reason[:160], "runtime_ms": x.runtime_ms, "eager_ms": x.eager_ms,
               "speedup": x.speedup, "wall_s": x.wall_s,
               "compile_s": x.evaluation.compile_s if x.evaluation else None} for x in cands}}
    (work / f"kevolve-{tag}.json").write_text(json.dumps(res, indent=1))
    print(f"kevolve {tag}: {len(evals)} evaluations in {wall:.1f} s (rc {rc})", flush=True)
    return res


# ---------------------------------------------------------------- KernelBench

def _stub_missing(names: tuple[str, ...]) -> None:
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            mod = types.ModuleType(name)
            mod.OpenAI = object  # type: ignore[attr-defined]
            mod.completion = None  # type: ignore[attr-defined]
            mod.load_dotenv = lambda *a, **k: None  # type: ignore[attr-defined]
            mod.tqdm = lambda it=None, *a, **k: it  # type: ignore[attr-defined]
            sys.modules[name] = mod


def _kb_eval(kb_src: str, ref_src: str, kernel_src: str, build_dir: str, device: int, build_only: bool) -> dict:
    """Runs in a fresh (spawned) process, exactly one sample, like eval_from_generations."""
    sys.path.insert(0, kb_src)
    _stub_missing(("openai", "litellm", "dotenv", "tqdm", "requests"))
    import torch
    from kernelbench import eval as kb_eval

    if build_only:
        ok, _, err = kb_eval.build_compile_cache(custom_model_src=kernel_src, verbose=False, build_dir=build_dir)
        return {"compiled": ok, "error": err}
    try:
        r = kb_eval.eval_kernel_against_ref(
            original_model_src=ref_src, custom_model_src=kernel_src, measure_performance=True,
            timing_method="cuda_event", verbose=False, num_correct_trials=5, num_perf_trials=100,
            build_dir=build_dir, device=torch.device(f"cuda:{device}"), backend="cuda", precision=torch.float32)
        return {} if r is None else r.model_dump()
    except Exception as e:  # noqa: BLE001 - eval_from_generations' "last level catch"
        return {"compiled": False, "correctness": False, "metadata": {"other_error": str(e)[:300]}}


KB_KWARGS = ("original_model_src", "custom_model_src", "measure_performance", "timing_method", "verbose",
             "num_correct_trials", "num_perf_trials", "build_dir", "device", "backend", "precision")


def _kb_probe(kb_src: str) -> dict:
    """In a fresh process: KernelBench's harness imports from kb_src (with the stubs) and takes _kb_eval's arguments."""
    import inspect

    sys.path.insert(0, kb_src)
    _stub_missing(("openai", "litellm", "dotenv", "tqdm", "requests"))
    from kernelbench import eval as kb_eval

    params = inspect.signature(kb_eval.eval_kernel_against_ref).parameters
    return {"module": kb_eval.__file__, "missing": [k for k in KB_KWARGS if k not in params],
            "build_compile_cache": hasattr(kb_eval, "build_compile_cache")}


def dry_run(args: argparse.Namespace, work: Path) -> None:
    """Everything but the runs: the samples, their problems in the suite, the harness's import, the bench command."""
    import shlex

    from kevolve.kernelbench.suite import SuiteError, load_suite

    picked, kb = chosen(args), kb_chosen(args)
    if not picked:
        raise SystemExit(f"error: --solutions {args.solutions}: no level_L_problem_N_sample_S_kernel.py chosen")
    wanted = sorted({(lv, n) for lv, n, _, _ in picked})
    try:
        suite = load_suite(args.kernelbench, sorted({lv for lv, _ in wanted}), ",".join(str(n) for _, n in wanted))
    except SuiteError as e:
        raise SystemExit(f"error: {e}") from None
    usable = {(p.level, p.number) for p in suite if p.problem is not None and not p.unavailable}
    if missing := [k for k in wanted if k not in usable]:
        raise SystemExit(f"error: --kernelbench {args.kernelbench}: no usable level{missing[0][0]} problem {missing[0][1]}")
    kb_src = args.kernelbench / "src"
    if not (kb_src / "kernelbench" / "eval.py").is_file():
        raise SystemExit(f"error: --kernelbench {args.kernelbench}: no src/kernelbench/eval.py (KernelBench's harness)")
    with mp.get_context("spawn").Pool(1) as pool:
        probe = pool.apply(_kb_probe, (str(kb_src.resolve()),))
    if probe["missing"]:
        raise SystemExit(f"error: {probe['module']}: eval_kernel_against_ref takes no {', '.join(probe['missing'])}")
    cmd = bench_cmd(args, work, work / "kevolve-cold", work / "kevolve-cache")
    print(f"dry run: {len(picked)} samples over {len(wanted)} problems (levels "
          f"{','.join(sorted({str(lv) for lv, _ in wanted}))}), every problem usable in {args.kernelbench}\n"
          f"KernelBench's harness would evaluate {len(kb)}: {' '.join(f'{a}/{b}/{c}' for a, b, c, _ in kb)}\n"
          f"its eval_kernel_against_ref imports from {probe['module']} and takes every argument used\n"
          f"kevolve: {shlex.join(cmd)}", flush=True)


def kb_chosen(args: argparse.Namespace) -> list[tuple[int, int, int, Path]]:
    """The samples KernelBench's harness evaluates: the chosen ones, or the fixed --kb-subset of them."""
    picked = chosen(args)
    if args.kb_subset is None:
        return picked
    keys = [x.strip() for x in args.kb_subset.read_text().splitlines() if x.strip()]
    have = {f"{lv}/{n}/{s}" for lv, n, s, _ in picked}
    if missing := [k for k in keys if k not in have]:
        raise SystemExit(f"error: --kb-subset {args.kb_subset}: {missing[0]} is not a chosen sample of --solutions")
    return [x for x in picked if f"{x[0]}/{x[1]}/{x[2]}" in keys]


def run_kernelbench(args: argparse.Namespace, work: Path) -> None:
    log = work / "kernelbench.jsonl"
    done = {json.loads(x)["key"] for x in log.read_text().splitlines() if x.strip()} if log.exists() else set()
    if not done:
        shutil.rmtree(work / "kb-build", ignore_errors=True)
    kb_src = str((args.kernelbench / "src").resolve())
    ctx = mp.get_context("spawn")
    todo = [s for s in kb_chosen(args) if f"{s[0]}/{s[1]}/{s[2]}" not in done]
    if args.kb_build_cache and todo and not (work / "kb-precompile.json").exists():
        t0 = time.monotonic()
        with ctx.Pool(os.cpu_count() or 1) as pool:  # batch_compile: one build per CPU worker
            jobs = [pool.apply_async(_kb_eval, (kb_src, "", p.read_text(), str(work / "kb-build" / f"{lv}_{n}" / f"{s}"),
                                                0, True)) for lv, n, s, p in todo]
            built = [j.get(timeout=args.kb_timeout * 4) for j in jobs]
        (work / "kb-precompile.json").write_text(json.dumps({"wall_s": time.monotonic() - t0, "built": built}))
    deadline = time.monotonic() + args.kb_budget_s
    for i, (level, num, s, path) in enumerate(todo):
        left = deadline - time.monotonic()
        if left < args.kb_min_s:
            print(f"kernelbench: {len(todo) - i} samples left, {left:.0f} s of the budget: run the phase again to "
                  "continue", flush=True)
            return
        ref = problem_file(args.kernelbench, level, num).read_text()
        limit = min(args.kb_timeout, left)
        t0 = time.monotonic()
        with ctx.Pool(1) as pool:  # cuda_single_eval_wrapper: a fresh process per sample
            job = pool.apply_async(_kb_eval, (kb_src, ref, path.read_text(), str(work / "kb-build" / f"{level}_{num}" / f"{s}"),
                                              0, False))
            try:
                res = job.get(timeout=limit)
            except mp.TimeoutError:
                if limit < args.kb_timeout:  # the call's budget ran out, not the sample's own limit: no verdict
                    print(f"kernelbench L{level}/{num}/{s}: stopped by the budget after {limit:.0f} s (not recorded)",
                          flush=True)
                    return
                res = {"compiled": False, "correctness": False, "metadata": {"timeout": args.kb_timeout}}
        wall = time.monotonic() - t0
        with open(log, "a") as f:
            f.write(json.dumps({"key": f"{level}/{num}/{s}", "wall_s": wall, "result": res}) + "\n")
        print(f"kernelbench L{level}/{num}/{s}: correct={res.get('correctness')} {wall:.1f} s", flush=True)


# ---------------------------------------------------------------- report

def _fmt(x: float | None) -> str:
    return "—" if x is None or x == -1.0 else f"{x:.4g}"


def _sort_key(kv: tuple[str, object]) -> list[int]:
    return [int(x) if x.isdigit() else 0 for x in kv[0].split("/")]


def report(args: argparse.Namespace, work: Path) -> dict:
    load = lambda name: json.loads((work / name).read_text()) if (work / name).exists() else None  # noqa: E731
    cold, warm, pre = load("kevolve-cold.json"), load("kevolve-warm.json"), load("kb-precompile.json")
    kb_rows = [json.loads(x) for x in (work / "kernelbench.jsonl").read_text().splitlines() if x.strip()] \
        if (work / "kernelbench.jsonl").exists() else []
    kb_wall = sum(r["wall_s"] for r in kb_rows) + (pre["wall_s"] if pre else 0.0)
    rate = lambda n, s, g=1: None if not s else 60.0 * n / s / g  # noqa: E731
    out = {"kevolve_cold": None if cold is None else {**cold, "per_gpu_minute": rate(cold["evaluations"], cold["wall_s"], cold["gpus"])},
           "kevolve_warm": None if warm is None else {**warm, "per_gpu_minute": rate(warm["evaluations"], warm["wall_s"], warm["gpus"])},
           "kernelbench": {"evaluations": len(kb_rows), "wall_s": kb_wall, "per_gpu_minute": rate(len(kb_rows), kb_wall),
                           "compiled": sum(bool(r["result"].get("compiled")) for r in kb_rows),
                           "correct": sum(bool(r["result"].get("correctness")) for r in kb_rows),
                           "build_cache": pre is not None, "precompile_s": pre["wall_s"] if pre else None}}
    if cold and kb_rows and cold["evaluations"]:
        # per evaluation: KernelBench may have run a fixed subset only (its ~71 s each do not fit the device time)
        out["ratio_cold"] = (kb_wall / len(kb_rows)) / (cold["wall_s"] / cold["evaluations"])
    lines = ["| harness | evaluations | not counted (infra_error) | wall s | per GPU-minute | verdicts |", "|---|---|---|---|---|---|"]
    for name in ("kevolve_cold", "kevolve_warm"):
        if v := out[name]:
            verdicts = ", ".join(f"{k} {n}" for k, n in (v.get("statuses") or {}).items())
            lines.append(f"| {name} | {v['evaluations']} | {v.get('infra_errors', 0)} | {v['wall_s']:.1f} | "
                         f"{v['per_gpu_minute'] or 0:.1f} | {verdicts} (bench rc {v['returncode']}) |")
    kb = out["kernelbench"]
    lines.append(f"| kernelbench | {kb['evaluations']} | 0 | {kb_wall:.1f} | {kb['per_gpu_minute'] or 0:.2f} | "
                 f"compiled {kb['compiled']}, correct {kb['correct']} |")
    if cold and cold.get("phases"):
        lines += ["", "kevolve cold, per phase (set-up phases `ref.*` counted once per problem):", "",
                  "| phase | evaluations | median s | total s | where |", "|---|---|---|---|---|"]
        lines += [f"| {' | '.join(map(str, row))} |" for row in cold["phases"]]
    if cold and cold.get("timeline"):
        lines += ["", "kevolve cold, outside evaluations (its timeline.jsonl; spans overlap across lanes and builds):", "",
                  "| span | count | median s | total s | what |", "|---|---|---|---|---|"]
        lines += [f"| {' | '.join(map(str, row))} |" for row in cold["timeline"]]
    lines += ["", "| level/problem/sample | kevolve | kevolve ms | eager ms | kevolve wall s | KernelBench correct | "
              "KernelBench ms | KB ref ms | KB wall s |", "|---|---|---|---|---|---|---|---|---|"]
    kb_by = {r["key"]: r for r in kb_rows}
    for key, c in sorted(((cold or {}).get("per_candidate") or {}).items(), key=_sort_key):
        r = kb_by.get(key, {})
        k = r.get("result", {})
        lines.append(f"| L{key} | {c['status']} | {_fmt(c['runtime_ms'])} | {_fmt(c.get('eager_ms'))} | {_fmt(c['wall_s'])} | "
                     f"{k.get('correctness', '')} | {_fmt(k.get('runtime'))} | {_fmt(k.get('ref_runtime'))} | "
                     f"{_fmt(r.get('wall_s'))} |")
    if "ratio_cold" in out:
        lines.append(f"\nKernelBench seconds per evaluation ({len(kb_rows)} evaluated) / kevolve's (cold, "
                     f"{cold['evaluations']} evaluated): {out['ratio_cold']:.1f}x")
    (work / "throughput.json").write_text(json.dumps(out, indent=1))
    (work / "throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", type=Path, required=True, help="KernelBench checkout (KernelBench/, src/)")
    ap.add_argument("--solutions", type=Path, default=ROOT / "scripts" / "kernelbench_level1_solutions")
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "throughput", help="state kept between calls")
    ap.add_argument("--out", type=Path, help="copy the reports here (e.g. $OUT/throughput)")
    ap.add_argument("--phase", choices=["all", "kevolve", "kevolve-cold", "kevolve-warm", "kernelbench", "report"],
                    default="all")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a plumbing check of the kevolve phase")
    ap.add_argument("--gpus", default=None, help="kevolve lanes, e.g. 0,1 (default: one GPU)")
    ap.add_argument("--only", type=lambda v: {int(x) for x in v.split(",") if x}, default=None,
                    help="problem numbers to keep, e.g. 20,21 (default: every problem with a sample)")
    ap.add_argument("--max-samples", type=int, default=None, help="samples 0..N-1 of each problem only")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="stop a kevolve phase after this long and report what finished (device calls are capped)")
    ap.add_argument("--bench-arg", action="append", default=[],
                    help="one more argument for `kevolve bench` (repeat: --bench-arg=--warm-workers --bench-arg=8)")
    ap.add_argument("--tag", default=None, help="name the kevolve phase's files with this instead of cold/warm")
    ap.add_argument("--kb-timeout", type=float, default=300.0, help="per-sample limit (KernelBench's default 180)")
    ap.add_argument("--kb-budget-s", type=float, default=480.0, help="stop the KernelBench phase after this long")
    ap.add_argument("--kb-build-cache", action="store_true", help="KernelBench's CPU pre-compile pool first")
    ap.add_argument("--dry-run", action="store_true", help="check the samples, the suite and the harness's import; "
                    "print the bench command; run nothing")
    ap.add_argument("--kb-subset", type=Path, default=None,
                    help="KernelBench evaluates only these samples (L/N/S per line, e.g. a set's kb_subset.txt)")
    ap.add_argument("--kb-min-s", type=float, default=90.0,
                    help="start no KernelBench sample with less of its budget left (a sample cut by the budget is "
                         "not recorded)")
    args = ap.parse_args()
    for name, path in (("--kernelbench", args.kernelbench), ("--solutions", args.solutions)):
        if not path.is_dir():
            raise SystemExit(f"error: {name} {path}: no such folder")
    if args.kb_subset is not None and not args.kb_subset.is_file():
        raise SystemExit(f"error: --kb-subset {args.kb_subset}: no such file")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.dry_run:
        return dry_run(args, args.work)
    if args.phase in ("all", "kevolve", "kevolve-cold"):
        run_kevolve(args, args.work, args.tag or "cold", fresh_cache=True)
    if args.phase in ("all", "kevolve", "kevolve-warm"):
        run_kevolve(args, args.work, args.tag or "warm", fresh_cache=False)
    if args.phase in ("all", "kernelbench") and args.device.startswith("cuda"):
        run_kernelbench(args, args.work)
    report(args, args.work)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for name in ["throughput.json", "throughput.md", "kernelbench.jsonl", "kb-precompile.json"] + \
                sorted(p.name for p in args.work.glob("kevolve-*.*") if p.suffix in (".json", ".log")):
            if (args.work / name).exists():
                shutil.copy(args.work / name, args.out / name)


if __name__ == "__main__":
    main()
