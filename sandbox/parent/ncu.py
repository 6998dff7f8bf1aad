"""Nsight Compute metrics for an accepted candidate (`--ncu`, where `ncu` exists).

Runs the candidate once more under `ncu` in its own process group and containment (scrubbed
environment, time limit; whatever it starts dies with it) — never inside the timed worker, since ncu replays kernels and serialises launches.
`python -m kevolve.sandbox.parent.ncu PROBLEM SOLUTION DEVICE SEED CACHE` is the profiled target.
"""

from __future__ import annotations

import csv
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from kevolve.records import Candidate, Evaluation, Problem
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.isolate.containment import contain
from kevolve.sandbox.isolate.launch import scrubbed_env
from kevolve.sandbox.policy.source import custom_kernel_names

log = logging.getLogger(__name__)
METRICS = {"dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
           "gpu__time_duration.sum": "duration_ns"}


def parse_csv(text: str) -> dict[str, dict[str, float]]:
    """{kernel id: {metric: value}} from `ncu --csv` output (other log lines skipped)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(lines):
        name = METRICS.get(row.get("Metric Name", ""))
        if name is None:
            continue
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
        if name == "duration_ns" and row.get("Metric Unit") == "usecond":
            value *= 1e3
        if name == "duration_ns" and row.get("Metric Unit") == "msecond":
            value *= 1e6
        rows.setdefault(f"{row.get('ID')}:{row.get('Kernel Name', '')}", {})[name] = value
    return rows


def summarize(rows: dict[str, dict[str, float]]) -> dict[str, float]:
    """Time-weighted DRAM / SM throughput (% of peak) over the profiled kernels."""
    total = sum(r.get("duration_ns", 0.0) for r in rows.values())
    if not rows or total <= 0:
        return {}
    out = {"kernels_profiled": float(len(rows)), "duration_us": total / 1e3}
    for key in ("dram_throughput_pct", "sm_throughput_pct"):
        out[key] = sum(r.get(key, 0.0) * r.get("duration_ns", 0.0) for r in rows.values()) / total
    return out


def attach(ev: Evaluation, problem: Problem, cand: Candidate, config: SandboxConfig, seed: int) -> Evaluation:
    """The evaluation with NCU metrics of the candidate's own kernels added to its profile."""
    if ev.profile is None or shutil.which("ncu") is None:
        return ev
    metrics = measure(problem, cand, config, seed)
    return ev.model_copy(update={"profile": ev.profile.model_copy(update={"ncu": metrics})}) if metrics else ev


def measure(problem: Problem, cand: Candidate, config: SandboxConfig, seed: int) -> dict[str, float]:
    scratch = Path(tempfile.mkdtemp(prefix="kevolve-ncu-"))
    try:
        (scratch / "problem.py").write_text(problem.source)
        (scratch / "solution.py").write_text(cand.source)
        names = custom_kernel_names(cand.source)
        cmd = ["ncu", "--csv", "--log-file", "ncu.csv", "--metrics", ",".join(METRICS),
               "--target-processes", "all", "--launch-count", "20"]
        if names:
            cmd += ["--kernel-name", "regex:" + "|".join(names)]
        cmd += [sys.executable, "-m", "kevolve.sandbox.parent.ncu", "problem.py", "solution.py", config.device,
                str(seed), str(config.cache_dir)]
        contained = contain(scratch.name)
        proc = subprocess.Popen(contained.wrap(cmd), cwd=scratch, env=scrubbed_env(config.device, scratch),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        contained.started(proc.pid)
        try:
            proc.wait(timeout=config.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            log.warning("ncu run timed out")
            return {}
        finally:
            contained.kill_all()
        path = scratch / "ncu.csv"
        return summarize(parse_csv(path.read_text(errors="replace"))) if path.exists() else {}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _target() -> None:
    import torch

    from kevolve.sandbox.build import compile as build
    from kevolve.sandbox.build.cache import build_scope
    from kevolve.sandbox.common import harness as h
    from kevolve.sandbox.common.protocol import Draw

    problem_path, solution_path, device_name, seed, cache = sys.argv[1:6]
    scratch = Path.cwd()
    build.install_build_hooks(Path(cache), None, build_scope(Path(solution_path).read_text()))
    problem = h.load_module(Path(problem_path).read_text(), "kevolve_problem", scratch)
    cand = h.load_module(Path(solution_path).read_text(), "kevolve_candidate", scratch)
    device = h.device_of(device_name)
    model = h.build_model(cand.ModelNew, problem, int(seed), device, "ModelNew")
    x = h.draw_inputs(problem, Draw(key="ncu", seed=int(seed) + 1), device)
    with torch.no_grad():
        for _ in range(2):
            model(*x)
    h.sync(device)


if __name__ == "__main__":
    _target()
