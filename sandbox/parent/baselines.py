"""Eager and torch.compile baselines, cached per (device, torch version, harness, problem hash).

The timings come from the sandbox's own reference worker, so they are measured exactly as
candidates are (same Timer, flushes, trials). Only the timings are cached: reference *outputs*
never touch the disk, because candidates run as the same user and could read them back.

`BenchSandbox` is a `LocalSandbox` that stores each problem's baselines and reuses a cached
torch.compile timing instead of building the compiled reference again: `kevolve bench` and `optimize`, `kevolve eval`
cold (`--baselines reuse`, the default) and its warm service (10.7 s of a cold H100 evaluation was that build).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from pydantic import Field

from kevolve.records import Candidate, Evaluation, Problem, Record, TimingStats
from kevolve.sandbox.config import CompileBaseline, SandboxConfig
from kevolve.sandbox.parent.local import LocalSandbox
from kevolve.sandbox.common.protocol import ReferenceSummary

log = logging.getLogger(__name__)


def torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def device_fingerprint(device: str) -> str:
    """The device model (not its index): 'NVIDIA H100 80GB HBM3', 'cpu (AMD EPYC 7B13 x2)'."""
    if device == "cpu":
        model = platform.processor() or platform.machine()
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.lower().startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        return f"cpu ({model} x{len(os.sched_getaffinity(0))})"
    index = device.split(":", 1)[1] if ":" in device else "0"
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", index],
                                 capture_output=True, text=True, timeout=30)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return f"cuda device {index}"


def harness_version() -> str:
    """A hash of the sandbox code that produces reference timings: changing how references are
    timed (threads, flushes, trial rules) must not reuse baselines measured the old way."""
    import hashlib
    import importlib.util

    h = hashlib.sha256()
    for mod in ("kevolve.sandbox.common.timing", "kevolve.sandbox.runner.step", "kevolve.sandbox.runner.pad",
                "kevolve.sandbox.runner.serve", "kevolve.sandbox.judge.serve", "kevolve.sandbox.judge.session",
                "kevolve.sandbox.judge.schedule", "kevolve.sandbox.judge.clock", "kevolve.sandbox.common.harness"):
        spec = importlib.util.find_spec(mod)
        if spec is not None and spec.origin:
            h.update(Path(spec.origin).read_bytes())
    return h.hexdigest()[:10]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_")[:80]


class Baseline(Record):
    """The reference's timings for one problem on one kind of device and torch version."""

    problem_id: str
    problem_name: str
    level: int | None = None
    device: str = Field(description="device fingerprint the cache is keyed on")
    device_name: str = Field(default="", description="what the reference worker reported")
    torch: str
    eager: TimingStats
    compiled: TimingStats | None = Field(default=None, description="torch.compile (inductor, default)")
    compile_note: str = Field(default="", description="why torch.compile has no timing, if it has none")
    trials: int
    max_timing_s: float
    measured_at: str


@dataclass
class BaselineCache:
    """JSON files at ROOT/DEVICE/torch-VERSION/harness-HASH/PROBLEM_HASH.json."""

    root: Path
    harness: str = field(default_factory=harness_version)

    def path(self, device: str, torch: str, problem_id: str) -> Path:
        return self.root / _slug(device) / f"torch-{_slug(torch)}" / f"harness-{self.harness}" / f"{problem_id}.json"

    def get(self, device: str, torch: str, problem_id: str) -> Baseline | None:
        p = self.path(device, torch, problem_id)
        try:
            return Baseline.model_validate_json(p.read_text())
        except (OSError, ValueError):
            return None

    def put(self, b: Baseline) -> None:
        p = self.path(b.device, b.torch, b.problem_id)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(b.model_dump_json(indent=1))
        os.replace(tmp, p)


def fits(b: Baseline | None, config: SandboxConfig) -> bool:
    """A cached baseline serves this config if it has every timing the config wants."""
    return b is not None and (b.compiled is not None or bool(b.compile_note) or not config.want_compile_baseline)


@dataclass
class BenchSandbox(LocalSandbox):
    """LocalSandbox whose problem baselines are kept in (and reused from) a BaselineCache.

    Speedups never come from the cache: every candidate is timed against the eager reference
    interleaved with its own calls, in the same judge session. The cache serves planning and
    reports, and spares re-measuring torch.compile (which builds for seconds to minutes); an
    Evaluation whose torch.compile timing came from the cache says so in its method.
    """

    cache: BaselineCache | None = None
    reuse: bool = True
    fingerprint: str = ""
    torch: str = field(default_factory=torch_version)
    # problem id -> where its baseline came from: 'cached' or 'measured'
    baseline_source: dict[str, str] = field(default_factory=dict)
    _cached: dict[str, Baseline] = field(default_factory=dict)

    def reference(self, problem: Problem, config: SandboxConfig) -> ReferenceSummary:
        if self.cache is None:
            return super().reference(problem, config)
        fp = self.fingerprint or device_fingerprint(config.device)
        cached = self.cache.get(fp, self.torch, problem.id) if self.reuse else None
        if fits(cached, config):
            assert cached is not None
            summary = super().reference(problem, config.model_copy(update={"compile_baseline": CompileBaseline.OFF}))
            self.baseline_source[problem.id] = "cached"
            self._cached[problem.id] = cached
            return summary.model_copy(update={"compiled": _marked(cached.compiled)})
        summary = super().reference(problem, config)
        self.baseline_source[problem.id] = "measured"
        if summary.eager is not None:
            self._keep(problem, config, summary.device_name, summary.eager, summary.compiled, summary.compile_note)
        return summary

    def evaluate(self, problem: Problem, candidate: Candidate, config: SandboxConfig) -> Evaluation:
        """A candidate's evaluation. A problem not prepared through `reference` (`kevolve eval` asks for one evaluation)
        whose torch.compile baseline is wanted: the cached one is used, else the one measured in the evaluation kept."""
        unseen = self.cache is not None and config.want_compile_baseline and problem.id not in self.baseline_source
        if unseen:
            self._lookup(problem, config)
        cached = self._cached.get(problem.id)
        if cached is not None and cached.compiled is not None:
            config = config.model_copy(update={"compile_baseline": CompileBaseline.OFF})
        ev = super().evaluate(problem, candidate, config)
        if cached is not None and ev.compile_ref_timing is None:
            ev = ev.model_copy(update={"compile_ref_timing": _marked(cached.compiled),
                                       "compile_note": "" if cached.compiled is not None else cached.compile_note})
        elif unseen and cached is None and ev.ref_timing is not None:
            self._keep(problem, config, ev.device, ev.ref_timing, ev.compile_ref_timing, ev.compile_note)
        return ev

    def _lookup(self, problem: Problem, config: SandboxConfig) -> None:
        assert self.cache is not None
        cached = self.cache.get(self.fingerprint or device_fingerprint(config.device), self.torch, problem.id) \
            if self.reuse else None
        if fits(cached, config):
            assert cached is not None
            self.baseline_source[problem.id] = "cached"
            self._cached[problem.id] = cached

    def _keep(self, problem: Problem, config: SandboxConfig, device_name: str, eager: TimingStats,
              compiled: TimingStats | None, compile_note: str) -> None:
        """Write the problem's baseline (its timings only) to the cache."""
        assert self.cache is not None
        note = "" if compiled is not None or not config.want_compile_baseline \
            else (compile_note or "torch.compile failed")[:300]
        self.baseline_source[problem.id] = "measured"
        self.cache.put(Baseline(
            problem_id=problem.id, problem_name=problem.name, level=problem.level,
            device=self.fingerprint or device_fingerprint(config.device), device_name=device_name, torch=self.torch,
            eager=eager, compiled=compiled, compile_note=note, trials=config.trials,
            max_timing_s=config.max_timing_s, measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds")))


def _marked(t: TimingStats | None) -> TimingStats | None:
    """A cached timing, labelled as such in its method."""
    return None if t is None else t.model_copy(update={"method": f"{t.method} (cached baseline)"})


__all__ = ["Baseline", "BaselineCache", "BenchSandbox", "device_fingerprint", "fits",
           "harness_version", "torch_version"]
