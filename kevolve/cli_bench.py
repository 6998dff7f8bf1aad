"""`kevolve bench`: run a KernelBench suite (or any folder in its layout) through the sandbox.

Heavy modules (torch, the sandbox, Ray) are imported inside the commands, never at import time.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kevolve import defaults
from kevolve.cli_common import (ALLOW_HELP, LANGUAGE_HELP, SLOWDOWN_HELP, check_archive, check_compile_baseline,
                                default_device, device_problem, env_cache_dir, fail, gpu_indices, ingest_mode, or_fail,
                                parse_allow)

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, invoke_without_command=True,
                  help="Run a KernelBench suite: solution sets, baselines, reports, comparisons.")

Suite = Annotated[Optional[Path], typer.Option(help="KernelBench checkout or a folder with level1/ … level4/")]
Level = Annotated[str, typer.Option(help="level(s): 1, or 1,2")]
Problems = Annotated[Optional[str], typer.Option(help="problem numbers, e.g. 1-10,15")]
Match = Annotated[Optional[str], typer.Option(help="regular expression on the problem file name")]
Device = Annotated[Optional[str], typer.Option(help="cuda or cpu (default: cuda if present)")]
Gpus = Annotated[Optional[str], typer.Option(help="GPU indices for one evaluation lane each, e.g. 0,1")]
CacheDir = Annotated[Optional[Path], typer.Option(help="build and baseline cache (default $KEVOLVE_CACHE_DIR, else "
                                                        "~/.cache/kevolve)")]


def _levels(spec: str) -> list[int]:
    try:
        levels = sorted({int(x) for x in spec.split(",") if x.strip()})
    except ValueError:
        fail(f"--level must be numbers 1-4 like 1 or 1,2, not {spec!r}")
    if not levels or any(lv not in (1, 2, 3, 4) for lv in levels):
        fail(f"--level must be numbers 1-4 like 1 or 1,2, not {spec!r}")
    return levels


def _devices(device: str | None, gpus: str | None) -> tuple[str, list[str]]:
    """(base device, one device per evaluation lane)."""
    device = device or default_device()
    if why := device_problem(device):
        fail(why)
    if device == "cpu":
        if gpus:
            fail("--gpus needs --device cuda")
        return device, ["cpu"]
    if gpus:
        try:
            idx = gpu_indices(gpus)
        except ValueError as e:
            fail(str(e))
        return "cuda", [f"cuda:{i}" for i in idx]
    return device, [device if ":" in device else "cuda:0"]


def _pin_cuda_arch(devices: list[str]) -> None:
    """torch's own builder (file-based `load` in workers) targets these architectures, not every
    visible GPU's; the build service and the workers' fast recipe key on the device's own."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return
    import torch

    caps = sorted({"%d.%d" % torch.cuda.get_device_capability(int(d.split(":")[1])) for d in devices})
    os.environ["TORCH_CUDA_ARCH_LIST"] = ";".join(caps)


def _config(device: str, seed: int, cache_dir: Path | None, timeout: float | None, trials: int | None,
            max_timing_s: float | None, compile_baseline: str, allow_torch_only: bool = False, audit: bool = False,
            policy_allow: tuple[str, ...] = (), memory_limit_gb: float | None = None,
            max_slowdown: float | None = None):  # noqa: ANN202
    """The bench's SandboxConfig: what the user gave, the sandbox's own defaults (kevolve/defaults.py) for the rest."""
    from kevolve.sandbox.config import BWRAP_ENV, CompileBaseline, SandboxConfig

    check_compile_baseline(compile_baseline)
    given = {"cache_dir": cache_dir.resolve() if cache_dir is not None else env_cache_dir(), "timeout_s": timeout,
             "trials": trials, "max_timing_s": max_timing_s, "memory_limit_gb": memory_limit_gb,
             "max_slowdown": max_slowdown}
    return SandboxConfig(device=device, seed=seed, compile_baseline=CompileBaseline(compile_baseline),
                         allow_torch_only=allow_torch_only, audit=audit, policy_allow=policy_allow,
                         bwrap=os.environ.get(BWRAP_ENV) or None, **{k: v for k, v in given.items() if v is not None})


def _load(suite: Path | None, level: str, problems: str | None, match: str | None):  # noqa: ANN202
    from kevolve.kernelbench.suite import SuiteError, load_suite

    if suite is None:
        fail("--suite KERNELBENCH_DIR is required")
    try:
        found = load_suite(suite, _levels(level), problems, match)
    except SuiteError as e:
        fail(str(e))
    if not found:
        fail("no problem matches the selection (--level / --problems / --match)")
    return found


def default_run_dir(runs_root: Path, suite: Path, levels: list[int], problems: str | None, match: str | None,
                    solutions: Path | None, device: str) -> Path:
    """The same command finds the same run folder, so that rerunning it resumes."""
    ident = "|".join([str(suite.resolve()), ",".join(map(str, levels)), problems or "", match or "",
                      str(solutions.resolve()) if solutions else "", device])
    tag = hashlib.sha256(ident.encode()).hexdigest()[:8]
    name = f"{suite.resolve().name}-L{''.join(map(str, levels))}-{solutions.resolve().name if solutions else 'x'}"
    return runs_root / f"{name}-{device.split(':')[0]}-{tag}"


@app.callback()
def bench(
    ctx: typer.Context,
    suite: Suite = None,
    level: Level = "1",
    problems: Problems = None,
    match: Match = None,
    solutions: Annotated[Optional[Path], typer.Option(help="solution set to evaluate (KernelBench layouts)")] = None,
    executor: Annotated[str, typer.Option(help="local (default) or ray")] = "local",
    address: Annotated[Optional[str], typer.Option(help="Ray cluster address (default: start a local one)")] = None,
    device: Device = None,
    gpus: Gpus = None,
    compile_workers: Annotated[Optional[int], typer.Option(min=0, help="compile-pool processes on spare CPU cores "
                                                                       "(default: spare cores on CUDA, 0 on CPU)")] = None,
    warm_workers: Annotated[Optional[int], typer.Option(min=0, help="runners per lane started ahead on the compile "
                                                                    "cores (default on CUDA: one per two compile cores, 2 to 8, "
                                                                    "within host memory; 0 on CPU)")] = None,
    run_dir: Annotated[Optional[Path], typer.Option(help="run folder (default: derived from the command)")] = None,
    runs_root: Annotated[Path, typer.Option(help="where default run folders go")] = Path("runs"),
    seed: Annotated[Optional[int], typer.Option(help="input-draw seed (default: fresh, stored with the run)")] = None,
    timeout: Annotated[Optional[float], typer.Option(
        help=f"seconds per runner job (default {defaults.TIMEOUT_S:g})")] = None,
    trials: Annotated[Optional[int], typer.Option(
        min=3, help=f"minimum timed trials (default {defaults.TRIALS})")] = None,
    max_timing_s: Annotated[Optional[float], typer.Option(
        help=f"stop adding trials after this long (default {defaults.MAX_TIMING_S:g})")] = None,
    max_slowdown: Annotated[Optional[float], typer.Option(min=0.0, help=SLOWDOWN_HELP)] = None,
    baselines: Annotated[str, typer.Option(help="reuse cached eager/compile timings, or live (re-measure)")] = "reuse",
    compile_baseline: Annotated[str, typer.Option(help="time torch.compile too: auto|on|off")] = "auto",
    cache_dir: CacheDir = None,
    retries: Annotated[int, typer.Option(min=0, help="retries of an infrastructure failure")] = 2,
    memory_limit_gb: Annotated[Optional[float], typer.Option(
        min=0.5, help="host memory limit of each evaluation process (default: half the available memory)")] = None,
    allow_torch_only: Annotated[bool, typer.Option(help="accept candidates that launch no custom kernel")] = False,
    audit: Annotated[bool, typer.Option("--audit", help="measure every ok row again: fresh runner, fresh inputs, "
                                        "the judge's own clock (audit_mismatch overturns it)")] = False,
    timings: Annotated[bool, typer.Option("--timings", help="at the end, where the time went: every phase's median "
                                          "and total over the evaluations")] = False,
    optimize: Annotated[bool, typer.Option("--optimize", help="let the agent write a solution per problem, "
                                                              "then evaluate those (instead of --solutions)")] = False,
    llm: Annotated[str, typer.Option(help="with --optimize: PROVIDER:MODEL, as for kevolve optimize")] = "openai:gpt-4o",
    base_url: Annotated[Optional[str], typer.Option(help="with --optimize: OpenAI-compatible server URL")] = None,
    budget: Annotated[Optional[str], typer.Option(help="with --optimize, per problem: N candidates, $X, 30m")] = None,
    language: Annotated[Optional[str], typer.Option(help="with --optimize: " + LANGUAGE_HELP)] = None,
    no_archive: Annotated[bool, typer.Option("--no-archive", help="leave the archive alone: no retrieval (with "
                                                                 "--optimize) and, unless --archive-ingest says so, "
                                                                 "nothing stored")] = False,
    archive_ingest: Annotated[Optional[str], typer.Option(
        help="what goes into the archive as each evaluation returns: all (default), winners (ok and faster than "
             "every one this run stored for the problem) or none")] = None,
    archive_db: Annotated[Optional[str], typer.Option(help="archive database URL (default: $KEVOLVE_DB, else "
                                                           "sqlite:///$KEVOLVE_HOME/archive.db)")] = None,
    allow: Annotated[Optional[list[str]], typer.Option("--allow", metavar="CATEGORY", help=ALLOW_HELP)] = None,
) -> None:
    """Evaluate a solution set over a suite (resumable: rerun the same command to continue)."""
    if ctx.invoked_subcommand is not None:
        return
    from kevolve.kernelbench.bench_run import BenchArgs, run_bench

    if solutions is None and not optimize:
        fail("give --solutions DIR (a solution set to evaluate) or --optimize (the agent writes one)")
    if solutions is not None and optimize:
        fail("--solutions and --optimize exclude each other")
    if solutions is not None and not solutions.is_dir():
        fail(f"--solutions {solutions}: no such folder")
    if executor not in ("local", "ray"):
        fail(f"--executor must be local or ray, not {executor!r}")
    if executor == "ray":
        from kevolve.extras import missing

        if why := missing("ray"):
            fail(why)
    if language is not None and not optimize:
        fail("--language needs --optimize (it tells the agent which kernels to write)")
    if baselines not in ("reuse", "live"):
        fail(f"--baselines must be reuse or live, not {baselines!r}")
    policy_allow = or_fail(parse_allow, allow)
    ingest = or_fail(ingest_mode, archive_ingest, no_archive)
    found = _load(suite, level, problems, match)
    db_url = check_archive(archive_db, ingest, optimize and not no_archive)
    base, lanes = _devices(device, gpus)
    if base.startswith("cuda"):
        _pin_cuda_arch(lanes)
    assert suite is not None
    levels = _levels(level)
    rd = run_dir or default_run_dir(runs_root, suite, levels, problems, match, solutions or Path("optimize"), base)
    config = _config(base, seed if seed is not None else secrets.randbelow(2**31 - 1000), cache_dir, timeout,
                     trials, max_timing_s, compile_baseline, allow_torch_only, audit, policy_allow, memory_limit_gb,
                     max_slowdown)
    if compile_workers is None:
        compile_workers = 0 if base == "cpu" else max(0, len(os.sched_getaffinity(0)) - len(lanes))
    agent_config = _agent_config(llm, base_url, budget, no_archive, ingest, rd, cache_dir, config,
                                 language) if optimize else None
    args = BenchArgs(suite=str(suite), levels=tuple(levels), problems=problems, match=match,
                     solutions=str(solutions or rd / "generated"), optimize=optimize, executor=executor, address=address, devices=tuple(lanes),
                     compile_workers=compile_workers, run_dir=str(rd),
                     warm_workers=warm_workers if warm_workers is not None else default_warm_workers(base, compile_workers),
                     reuse_baselines=baselines == "reuse",
                     retries=retries, seed_given=seed is not None, archive_ingest=ingest.value, timings=timings)
    code = run_bench(args, found, config, agent_config, archive_url=db_url)
    raise typer.Exit(code)


def _agent_config(llm: str, base_url: str | None, budget: str | None, no_archive: bool, ingest: object,
                  run_dir: Path, cache_dir: Path | None, sandbox: object,
                  language: str | None = None):  # noqa: ANN202
    """`kevolve optimize`'s configuration for --optimize (read once, here, at the entry point); its sandbox
    takes the bench's settings (`sandbox`, the bench's SandboxConfig: limits, trials, rules)."""
    from kevolve.agent.settings import SettingsError, build_config, parse_budget
    from kevolve.kernelbench.optimize_mode import agent_sandbox

    try:
        return build_config(llm=llm, base_url=base_url, env=os.environ, device=sandbox.device,  # type: ignore[attr-defined]
                            language=language, runs_dir=run_dir / "agent",
                            cache_root=cache_dir.resolve() if cache_dir else None, archive=not no_archive,
                            archive_ingest=ingest,
                            stop=parse_budget(budget) if budget else {},
                            sandbox=agent_sandbox(sandbox))  # type: ignore[arg-type]
    except SettingsError as e:
        fail(str(e))


@app.command("baselines")
def baselines_cmd(
    suite: Suite = None,
    level: Level = "1",
    problems: Problems = None,
    match: Match = None,
    device: Device = None,
    cache_dir: CacheDir = None,
    refresh: Annotated[bool, typer.Option(help="re-measure problems already in the cache")] = False,
    compile_baseline: Annotated[str, typer.Option(help="time torch.compile too: auto|on|off")] = "auto",
    trials: Annotated[Optional[int], typer.Option(min=3, help=f"minimum timed trials (default {defaults.TRIALS})")] = None,
    max_timing_s: Annotated[Optional[float], typer.Option(
        help=f"stop adding trials after this long (default {defaults.MAX_TIMING_S:g})")] = None,
    timeout: Annotated[float, typer.Option(help="seconds per baseline job (a whole problem's eager and compile)")] = 600.0,
    published: Annotated[Optional[Path], typer.Option(help="KernelBench's published timing folder or JSON, to compare")] = None,
    out: Annotated[Optional[Path], typer.Option(help="write the measured table (and comparison) as JSON here")] = None,
    input_draws: Annotated[int, typer.Option(min=1, max=4, help="input sets rotated while timing (a bench run uses 4)")] = 4,
    jobs: Annotated[Optional[int], typer.Option(min=1, help="problems prepared (started, set up, compiled) at once; "
                                                "one at a time is timed (default: from the cores)")] = None,
    pause_prep: Annotated[bool, typer.Option(help="pause the preparing baseline runners while one is timed")] = True,
    memory_budget_gb: Annotated[Optional[float], typer.Option(min=0, help="memory the prepared problems may hold at "
                                                              "once: GPU, or host with --device cpu (default: "
                                                              "the device's, less a margin)")] = None,
    time_limit_s: Annotated[Optional[float], typer.Option(min=1, help="stop after this long, keeping what was "
                                                          "measured (exit 3: run again to continue)")] = None,
    memory_limit_gb: Annotated[Optional[float], typer.Option(min=0.1, help="host memory per runner")] = None,
) -> None:
    """Measure eager (and torch.compile) baselines into the cache, optionally beside published ones."""
    from kevolve.sandbox.parent.baseline_pool import PoolSettings, default_budget, default_jobs
    from kevolve.kernelbench.bench_baselines import run_baselines

    found = _load(suite, level, problems, match)
    base, _ = _devices(device, None)
    if published is not None and not published.exists():
        fail(f"--published {published}: no such file or folder")
    config = _config(base, 0, cache_dir, timeout, trials, max_timing_s, compile_baseline,
                     memory_limit_gb=memory_limit_gb)
    config = config.model_copy(update={"n_draws": input_draws})
    n = jobs or default_jobs(len(os.sched_getaffinity(0)))
    budget = int(memory_budget_gb * 2**30) if memory_budget_gb is not None else default_budget(config.device, n)
    settings = PoolSettings(jobs=n, memory_budget=budget, pause_prep=pause_prep, time_limit_s=time_limit_s)
    raise typer.Exit(run_baselines(found, config, refresh, published, out, settings))


@app.command("compare")
def compare_cmd(
    run_a: Annotated[Path, typer.Argument(help="first run folder")],
    run_b: Annotated[Path, typer.Argument(help="second run folder")],
    tolerance: Annotated[float, typer.Option(help="speedup ratios within 1±tolerance count as the same")] = 0.05,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """Per-problem differences between two runs (matched by problem content hash, then name)."""
    from kevolve.kernelbench.compare import CompareError, compare
    from kevolve.kernelbench.console import print_compare

    try:
        diffs = compare(run_a, run_b, tolerance)
    except CompareError as e:
        fail(str(e))
    if json_out:
        import json

        sys.stdout.write(json.dumps([d.model_dump(mode="json") for d in diffs]) + "\n")
    else:
        print_compare(diffs, str(run_a), str(run_b))


def default_warm_workers(base: str, compile_workers: int) -> int:
    """Runners a GPU lane keeps started ahead. A runner's warm start costs ~11 s (torch's import and the
    profiler's first use, H100 2026-11-24) and an evaluation of a level-1 candidate 1-2 s: two spares
    left the lane waiting 3-7 s for one on most candidates (12 in 90 s; with eight, 12 in 69 s).
    One per two compile cores (the cores they start on), 2 to 8, and ~3 GiB of host memory each."""
    if base == "cpu":
        return 0
    from kevolve.sandbox.isolate.memory import available_bytes

    avail = available_bytes()
    by_memory = 8 if avail is None else max(2, int(avail // (3 * 2**30)))
    return max(2, min(8, compile_workers // 2, by_memory))
