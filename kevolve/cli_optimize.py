"""`kevolve optimize`: turn a PyTorch module into a verified, faster kernel (the agent loop).

Registered in cli.py; heavy modules (torch, langgraph, the SDKs) are imported inside the command.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kevolve import defaults
from kevolve.cli_common import (ALLOW_HELP, LANGUAGE_HELP, NO_GPU, SLOWDOWN_HELP, check_archive, default_device, device_problem,
                                fail, gpu_indices, ingest_mode, parse_allow)


def optimize_cmd(
    module: Annotated[Optional[str], typer.Argument(
        help="KernelBench file, or path.py:ClassName / package.module:ClassName with --init and --input")] = None,
    llm: Annotated[Optional[str], typer.Option(help="PROVIDER:MODEL — openai:gpt-4o (default), anthropic:claude-sonnet-4-6, "
                                                    "vllm:MODEL, ollama:MODEL, compatible:MODEL (with --base-url), demo (recorded replies, no key); "
                                                    "--resume keeps the run's own")] = None,
    base_url: Annotated[Optional[str], typer.Option(help="server URL for OpenAI-compatible servers")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="no LLM: generated fused CUDA kernels, tuned by "
                                                            "the same loop (needs --device cuda)")] = False,
    budget: Annotated[Optional[str], typer.Option(help="N candidates, $X dollars, a duration (30m), Nk tokens and/or a "
                                                       "device time (20m gpu), comma-separated")] = None,
    budget_usd: Annotated[Optional[float], typer.Option(min=0, help="stop once the LLM spend reaches this")] = None,
    budget_tokens: Annotated[Optional[int], typer.Option(min=1, help="LLM tokens (prompts + replies, every call) the run "
                                                                     "may use at most")] = None,
    budget_device: Annotated[Optional[str], typer.Option("--budget-device", "--max-gpu-seconds", help=(
        "device time the evaluations may hold at most, the final audit included, e.g. 600, 20m, 1h"))] = None,
    max_candidates: Annotated[Optional[int], typer.Option(min=1, help="stop after this many proposals, each one LLM call (a reply "
                                                                         "without code or a duplicate counts)")] = None,
    time_limit: Annotated[Optional[str], typer.Option(help="stop after this long, e.g. 3600, 30m, 2h")] = None,
    target_speedup: Annotated[Optional[float], typer.Option(min=0, help="stop once this fast vs eager")] = None,
    patience: Annotated[Optional[int], typer.Option(min=1, help="generations without improvement before stopping")] = None,
    islands: Annotated[Optional[int], typer.Option(min=1, help="sub-populations (migration between them)")] = None,
    concurrency: Annotated[Optional[int], typer.Option(min=1, help="proposals in flight")] = None,
    parallel_evaluations: Annotated[Optional[int], typer.Option(
        min=1, help="evaluations at once (default 1: timings on one device must not overlap)")] = None,
    gpus: Annotated[Optional[str], typer.Option(help="GPU indices, one evaluation lane each, e.g. 0,1: evaluations run "
                                                "one per GPU, all at once")] = None,
    jobs_per_generation: Annotated[Optional[int], typer.Option(min=1, help="proposals per generation")] = None,
    max_repairs: Annotated[Optional[int], typer.Option(min=0, help="consecutive repairs per lineage")] = None,
    seed: Annotated[Optional[int], typer.Option(help="evolution seed (also keys the reply cache)")] = None,
    device: Annotated[Optional[str], typer.Option(help="cuda, cuda:N or cpu (default: cuda if present)")] = None,
    language: Annotated[Optional[str], typer.Option(help=LANGUAGE_HELP)] = None,
    init: Annotated[Optional[str], typer.Option(help="constructor arguments, e.g. '1024, 4096'")] = None,
    input_: Annotated[Optional[list[str]], typer.Option("--input", help="example input DTYPE[SHAPE], e.g. "
                                                                        "'float32[32,1024]'; repeat per argument")] = None,
    resume: Annotated[Optional[str], typer.Option(help="continue the run with this id (or folder)")] = None,
    runs_dir: Annotated[Path, typer.Option(help="where run folders go")] = Path("runs"),
    timeout: Annotated[Optional[float], typer.Option(min=1, help="seconds per sandbox job")] = None,
    max_slowdown: Annotated[Optional[float], typer.Option(min=0.0, help=SLOWDOWN_HELP)] = None,
    trials: Annotated[Optional[int], typer.Option(
        min=3, help=f"minimum timed trials of each evaluation, adaptive beyond (default {defaults.TRIALS})")] = None,
    max_timing_s: Annotated[Optional[float], typer.Option(
        min=0.1, help=f"stop adding trials to an evaluation after this long (default {defaults.MAX_TIMING_S:g})")] = None,
    memory_limit_gb: Annotated[Optional[float], typer.Option(
        min=0.5, help="host memory limit of each evaluation process (default: half the available memory)")] = None,
    no_archive: Annotated[bool, typer.Option("--no-archive", help="leave the archive alone: no examples retrieved "
                                                                 "and, unless --archive-ingest says so, nothing stored")] = False,
    archive_ingest: Annotated[Optional[str], typer.Option(
        help="what goes into the archive as each evaluation returns: all (default), winners (ok and faster than "
             "every one this run stored) or none")] = None,
    archive_db: Annotated[Optional[str], typer.Option(help="archive database URL (default: $KEVOLVE_DB, else "
                                                           "sqlite:///$KEVOLVE_HOME/archive.db)")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="do not use the disk cache of LLM replies")] = False,
    no_race: Annotated[bool, typer.Option("--no-race", help="time every candidate fully, also one plainly slower "
                                          "than the best so far (default: its timing stops there)")] = False,
    llm_cache: Annotated[Optional[Path], typer.Option(help="folder of the LLM reply cache "
                                                           "(default: $KEVOLVE_CACHE_DIR/llm)")] = None,
    prompts: Annotated[Optional[Path], typer.Option(help="a folder of prompt files (system.md, translate.md, repair.md, "
                                                        "mutate.md, crossover.md) replacing the built-in ones")] = None,
    parts: Annotated[bool, typer.Option("--parts", help="a whole model: split it into its parts (submodules), run the loop "
                                                        "on each part's own problem (one prompt per part; the budgets "
                                                        "are the whole run's, spread by the parts' shares), compose "
                                                        "the winners and judge them as the whole model; with --resume, "
                                                        "go on with a --parts run")] = False,
    graph: Annotated[bool, typer.Option("--graph", help="print the loop's graph (mermaid) and exit")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print the result as one JSON object")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress lines")] = False,
    allow: Annotated[Optional[list[str]], typer.Option("--allow", metavar="CATEGORY", help=ALLOW_HELP)] = None,
) -> None:
    """Optimize a PyTorch module: LLM-proposed kernels, verified and timed, evolved in islands."""
    if graph:
        from kevolve.agent.graph import mermaid

        sys.stdout.write(mermaid())
        return
    from kevolve.agent.inputs import load_target
    from kevolve.agent.run import OptimizeError, UsageError, run_optimize
    from kevolve.agent.settings import SettingsError, build_config, parse_budget, parse_duration, saved_config
    from kevolve.contract import ProblemError

    if module is None and resume is None:
        fail("give a MODULE to optimize (or --resume RUN_ID)")
    try:
        stop: dict[str, object] = parse_budget(budget) if budget else {}
        stop.update({k: v for k, v in dict(budget_usd=budget_usd, max_candidates=max_candidates, budget_tokens=budget_tokens,
                                           target_speedup=target_speedup, patience=patience).items() if v is not None})
        if time_limit is not None:
            stop["time_limit_s"] = parse_duration(time_limit)
        if budget_device is not None:
            stop["budget_device_s"] = parse_duration(budget_device)
        prior = saved_config(runs_dir, resume) if resume else None
        if resume and prior is None:
            raise SettingsError(f"--resume {resume}: no such run (looked in {runs_dir}/ and at that path)")
        offline = offline or (prior is not None and prior.offline)
        if llm is None and prior is not None and prior.llm is not None:
            llm, base_url = prior.llm.label, base_url or prior.llm.base_url
        # In the order a user fixes them: the file, the device, then the LLM and its key.
        problem = None if resume else load_target(module or "", init, input_ or [])
        dev = device or default_device()
        if why := device_problem(dev):
            raise SettingsError(why)
        if offline and not dev.startswith("cuda"):
            gpu = device is not None and default_device() == "cuda"  # --device cpu on a GPU machine
            raise SettingsError("--offline generates CUDA kernels: it needs --device cuda" if gpu else
                                f"--offline generates CUDA kernels and needs an NVIDIA GPU: {NO_GPU}")
        if (llm or "").strip().lower().partition(":")[0] == "demo":
            from kevolve.agent.llm.demo import PROBLEM, supports

            if dev != "cpu" or (problem is not None and not supports(problem.source)):
                raise SettingsError(f"--llm demo has recorded replies for {PROBLEM} with --device cpu only "
                                    "(a real LLM: --llm openai:MODEL, anthropic:MODEL, vllm:MODEL …)")
        ingest = ingest_mode(archive_ingest, no_archive)
        lanes = _gpu_lanes(gpus, dev, parallel_evaluations)
        config = build_config(llm=llm or "openai:gpt-4o", offline=offline, base_url=base_url, env=os.environ,
                              device=dev, language=language, runs_dir=runs_dir, llm_cache=not no_cache,
                              llm_cache_dir=llm_cache, archive=not no_archive, stop=stop, archive_ingest=ingest,
                              prompts_dir=prompts, race=not no_race, gpus=lanes,
                              parallel_evaluations=parallel_evaluations,
                              sandbox={"timeout_s": timeout, "policy_allow": parse_allow(allow) or None,
                                       "memory_limit_gb": memory_limit_gb, "max_slowdown": max_slowdown,
                                       "trials": trials, "max_timing_s": max_timing_s},
                              evolution=dict(islands=islands, concurrency=concurrency, seed=seed,
                                             jobs_per_generation=jobs_per_generation, max_repairs=max_repairs))
    except (SettingsError, ProblemError) as e:
        fail(str(e))
    db_url = check_archive(archive_db, ingest, not no_archive)
    if not quiet:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
        logging.getLogger("kevolve.agent").setLevel(logging.INFO)
    started: list[str] = []

    def announce(run) -> None:  # noqa: ANN001
        started.append(run.run_id)
        typer.echo(f"run {run.run_id}: {run.path}", err=True)

    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        if parts:
            from kevolve.agent.parts import run_parts

            result = run_parts(problem, config, on_start=announce, archive_url=db_url, resume=resume)
        else:
            result = run_optimize(problem, config, resume=resume, on_start=announce, archive_url=db_url)
    except OptimizeError as e:
        fail(str(e), code=2 if isinstance(e, UsageError) else 1)
    except KeyboardInterrupt as e:
        fail(f"{'terminated' if isinstance(e, Terminated) else 'interrupted'}; continue with: kevolve optimize "
             f"{'--parts ' if parts else ''}--resume {started[0] if started else '…'}",
             code=143 if isinstance(e, Terminated) else 130)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if json_out:
        sys.stdout.write(result.model_dump_json() + "\n")
    else:
        sys.stdout.write((result.run_dir / "report.md").read_text())
    if why := nothing_because_of_environment(result, config.llm.endpoint if config.llm else "the offline generator"):
        fail(why, code=1)
    typer.echo(result.message, err=True)
    raise typer.Exit(result.answer.exit_code)  # 0 improved, 4 nothing faster than eager, 5 nothing correct


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: the proposals and evaluations in flight finish and are kept, the sandbox
    closes, and the run can be resumed (the default action would end the process where it stands)."""



def _gpu_lanes(gpus: str | None, device: str, parallel: int | None) -> tuple[int, ...]:
    """--gpus as indices; SettingsError (one line) where it cannot mean lanes of GPUs."""
    from kevolve.agent.settings import SettingsError

    if not gpus:
        return ()
    try:
        lanes = gpu_indices(gpus, visible=False)
    except ValueError as e:
        raise SettingsError(str(e)) from None
    if not device.startswith("cuda"):
        raise SettingsError(f"--gpus gives each GPU an evaluation lane: it needs --device cuda, not {device}")
    if device not in ("cuda", *(f"cuda:{g}" for g in lanes)):
        raise SettingsError(f"--device {device} and --gpus {gpus} disagree: give --device cuda with --gpus")
    if parallel is not None and parallel != len(lanes):
        raise SettingsError(f"--gpus {gpus} runs {len(lanes)} evaluations at once, one per GPU: leave out "
                            f"--parallel-evaluations {parallel}")
    try:
        return gpu_indices(gpus)  # each one on this machine
    except ValueError as e:
        raise SettingsError(str(e)) from None


def _terminated(signum: int, frame: object) -> None:
    raise Terminated


def nothing_because_of_environment(result, endpoint: str) -> str | None:  # noqa: ANN001 - an agent Result
    """One line when the run produced nothing because of the environment (the LLM never answered,
    or every evaluation was the machine's fault), for a non-zero exit; None when it produced anything."""
    if result.best_candidate_id is not None or not result.outcomes:
        return None
    resume = f"continue with: kevolve optimize --resume {result.run_id}"
    if set(result.outcomes) == {"llm_error"}:
        return (f"no proposal came back from the LLM at {endpoint} ({result.outcomes['llm_error']} llm_error; "
                f"{result.stop_reason[:200]}): check the server, the URL, the API key and the model name; {resume}")
    if set(result.outcomes) <= {"llm_error", "infra_error"}:
        return (f"no candidate was judged: every evaluation failed on this machine (infra_error; "
                f"{result.stop_reason[:200]}): see `kevolve doctor` and the run's trials.jsonl; {resume}")
    return None
