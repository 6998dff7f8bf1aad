"""Human-readable output for the CLI (rich)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kevolve.records import Evaluation, TimingStats
from kevolve.sandbox.common.protocol import Progress


def _ms(t: TimingStats | None) -> str:
    return "—" if t is None else f"{t.median_ms:.4f} ms (IQR {t.iqr_ms:.4f}, n={t.trials})"


# The evaluation's parts a user reads (the rest of phase_s lies inside them: `--timings` shows every one).
_PARTS = (("ref.reference", "reference"), ("compile", "build"), ("correctness", "correctness"), ("timing", "timing"),
          ("profile", "profile"))


def time_line(ev: Evaluation) -> str:
    """'14.2 s: reference 12.8 s, build 0.1 s, correctness 0.2 s, timing 0.5 s (--timings: every phase)': where an
    evaluation's time went in a few named parts (issue 37: ~30 internal phase names were printed by default)."""
    parts = [f"{name} {ev.phase_s[key]:.1f} s" for key, name in _PARTS if ev.phase_s.get(key, 0.0) >= 0.05]
    head = f"{ev.wall_s:.1f} s" if ev.wall_s else ""
    body = ", ".join(parts)
    return f"{head}{': ' if head and body else ''}{body}  [dim](--timings: every phase)[/]"


# What the judge's phases (sandbox/judge/progress.py) mean to someone waiting for them
PHASE_WORDS = {"reference": "preparing the reference: inputs, the float64 truth, eager's timing",
               "compile": "building and loading the candidate", "correctness": "checking its outputs",
               "quiet": "letting the machine settle", "timing": "timing it against eager",
               "clock": "timing it on the judge's clock", "profile": "profiling its kernels",
               "ablation": "checking that its kernels do the work", "finish": "finishing",
               "audit": "audit: measuring it again in a fresh process", "audit again": "audit: a second fresh process"}


def live_text(phase: str, seconds: float, left_s: float | None, audit_next: bool = False) -> str:
    """The live line: the phase in words, the time so far and, where the judge gave one, its bound on the time left
    (sandbox/judge/eta.py; `left_s` already counted down to now). `audit_next`: an audit follows this request."""
    eta = f", up to {math.ceil(left_s)} s left{', then the audit' if audit_next else ''}" \
        if left_s is not None and left_s > 0 else ""
    return f"evaluating: {escape(phase)}  [dim]({seconds:.0f} s{eta})[/]"


@contextmanager
def live_phases(box: object, quiet: bool = False, audit: bool = False) -> Iterator[None]:
    """While `box` evaluates: one live line on stderr naming the judge's phase, the time so far and the time left
    where the judge can bound it (a terminal only; nothing with --json or when stderr is a file, so scripts read the
    same output as before). `audit`: an audit request follows an ok verdict (its phases are marked as the audit's)."""
    con = Console(stderr=True)
    if quiet or not con.is_terminal or not hasattr(box, "progress"):
        yield
        return
    t0, done, lock = time.monotonic(), threading.Event(), threading.Lock()
    now: dict[str, Any] = {"words": "starting the judge", "left_s": None, "at": t0, "audit": False}
    from rich.live import Live
    from rich.spinner import Spinner

    spinner = Spinner("dots", text=f"evaluating: {now['words']}", style="status.spinner")
    with Live(spinner, console=con, refresh_per_second=12.5, transient=True) as live:
        def draw() -> None:  # drawn at once, so that a phase of a fraction of a second is seen too
            with lock:
                t = time.monotonic()
                left = None if now["left_s"] is None else now["left_s"] - (t - now["at"])
                spinner.update(text=live_text(now["words"], t - t0, left, audit and not now["audit"]))
                live.refresh()

        def tick() -> None:
            while not done.wait(1.0):
                draw()

        def show(p: Progress) -> None:
            with lock:
                now["audit"] = now["audit"] or p.phase.startswith("audit")
                words = PHASE_WORDS.get(p.phase, p.phase)
                now["words"] = f"audit: {words}" if now["audit"] and not words.startswith("audit") else words
                now["left_s"], now["at"] = p.left_s, time.monotonic()
            draw()

        box.progress = show  # type: ignore[attr-defined]
        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()
            box.progress = None  # type: ignore[attr-defined]


def print_evaluation(ev: Evaluation) -> None:
    con = Console()
    style = "green" if ev.ok else "red"
    con.print(f"[bold {style}]{ev.outcome.value}[/]  {escape(ev.reason)}")  # a reason quotes the candidate
    table = Table(show_header=False, box=None)
    stop = ev.timing.stopped.split(": ", 1)[-1] if ev.timing is not None and ev.timing.stopped else ""
    table.add_row("candidate", _ms(ev.timing) + (f"  [dim]stopped: {escape(stop)}[/]" if stop else ""))
    how = dict(part.split(" ", 1) for part in ev.baseline.split(", ") if part)  # {'eager': 'interleaved', …}
    note = lambda k: f"  [dim]{how[k]}[/]" if k in how else ""  # noqa: E731
    table.add_row("eager", _ms(ev.ref_timing) + note("eager"))
    table.add_row("torch.compile", _ms(ev.compile_ref_timing) + note("compile")
                  + (f"  [dim]{ev.compile_note}[/]" if ev.compile_ref_timing is None and ev.compile_note else ""))
    if ev.speedup is not None:
        vs_c = f", {ev.speedup_vs_compile:.2f}x vs torch.compile" if ev.speedup_vs_compile else ""
        table.add_row("speedup", f"{ev.speedup:.2f}x vs eager{vs_c}")
    lt, rt = ev.launch_timing, ev.ref_launch_timing
    if ev.speedup_launch is not None and lt is not None and rt is not None:
        table.add_row("launch work counted", f"{ev.speedup_launch:.2f}x vs eager  [dim]{lt.median_ms:.4f} ms against "
                      f"{rt.median_ms:.4f} ms, the GPU idle at each call's start (KernelBench's timer)[/]")
    if ev.audit is not None:
        table.add_row("audit", ev.audit.summary)
    table.add_row("device", ev.device)
    table.add_row("time", time_line(ev))
    con.print(table)
    if ev.profile and ev.profile.kernels:
        kt = Table("kernel", "calls", "device µs", "custom")
        for k in ev.profile.kernels[:12]:
            kt.add_row(k.name[:70], str(k.count), f"{k.device_time_us:.1f}", "yes" if k.custom else "")
        con.print(kt)
    if not ev.ok and ev.candidate_log.strip():
        # as text, not markup: a compiler's "[-Wsign-compare]" or a candidate's own brackets are printed as they are
        con.print(Text("\n".join(ev.candidate_log.strip().splitlines()[-15:]), style="dim"), highlight=False)


# Where the phases run: the parent only checks the source; the judge prepares the problem and drives
# the runner; the runner builds and runs the candidate (see sandbox/judge/serve.py).
_WHERE = {"start": "judge (runner warm-up wait)", "compile": "runner: build + import + construct",
          "correctness": "runner calls + judge checks", "timing": "runner calls, reference interleaved",
          "profile": "runner (profiler) + judge", "ablation": "runner + judge", "finish": "runner report",
          "compare": "judge, on the device (inside the phases above)",
          "compare_truth": "judge: the truth at hand (copied in when kept in host memory; inside compare)",
          "compare_outputs": "judge: outputs against the truth, fingerprints (inside compare)",
          "compare_inputs": "judge: inputs found untouched (inside compare)",
          "calls": "judge: candidate calls, request to answer (inside the phases above)",
          "calls_device": "runner: the candidate's device time by its events (inside calls)",
          "calls_pad": "runner: the GPU pad queued before each candidate call (inside calls)",
          "ref_calls": "judge: reference calls interleaved with the candidate's, request to answer",
          "ref_calls_device": "reference runner: device time by its events (inside ref_calls)",
          "ref_calls_pad": "reference runner: the GPU pad before each call (inside ref_calls)",
          "slots": "judge: a draw's inputs put in a runner slot (host residency: copied in; regenerated: made again)",
          "flush": "judge: its cache flush before every call",
          "retire": "judge: the runner stopped, its scratch checked and removed",
          "retime": "runner calls: a second timing pass after a suspect first one",
          "first_launch": "runner: first call beyond a typical one, Triton / NVRTC JIT (inside correctness)",
          "clock": "runner calls without the GPU pad, alternating with the reference's: launch-inclusive time "
                   "(CUDA), the audit's judge clock"}


def timings_rows(ev: Evaluation) -> list[tuple[str, str, str, str]]:
    """(phase, wall s, judge CPU s, where) for every phase of an evaluation, reference phases first."""
    rows = []
    for k, v in ev.phase_s.items():
        cpu = ev.cpu_s.get(f"judge.{k}")
        where = "judge: problem set-up (once per problem)" if k.startswith("ref.") else _WHERE.get(k, "")
        rows.append((k, f"{v:.3f}", "" if cpu is None else f"{cpu:.3f}", where))
    if "runner" in ev.cpu_s:
        rows.append(("runner CPU", "", f"{ev.cpu_s['runner']:.3f}", "the candidate runner's process group"))
    rows.append(("total", f"{ev.wall_s:.3f}", "", "as the parent saw it"))
    return rows


def print_where_time_goes(ev: Evaluation) -> None:
    """--timings: the candidate's profiled call beside eager's, kernels by who wrote them (kevolve/where_time.py)."""
    from kevolve.where_time import rows

    got = rows(ev)
    if got:
        table = Table("where the time goes (one profiled call)", "eager", "candidate", "eager / candidate")
        for row in got:
            table.add_row(*(escape(c) for c in row))
        Console().print(table)
    from kevolve.where_time import parts

    if split := parts(ev):
        table = Table("part: the candidate's kernels", "eager's kernels", "share of eager", "eager / candidate ms",
                      "speedup")
        for part in split:
            table.add_row(*(escape(c) for c in part))
        Console().print(table)


def print_timings(ev: Evaluation, extra: list[tuple[str, str, str, str]] | None = None) -> None:
    """--timings' table: every phase of `ev`, then `extra` rows (the warm service's, sandbox/parent/warm_service.py)."""
    table = Table("phase", "wall s", "CPU s", "where", title="where the time went")
    for row in timings_rows(ev) + list(extra or ()):
        table.add_row(*row)
    Console().print(table)


def phase_summary(evals: list[Evaluation]) -> list[tuple[str, str, str, str, str]]:
    """(phase, evaluations, median s, total s, where) over many evaluations: a bench's or a run's."""
    import statistics

    by: dict[str, list[float]] = {}
    seen: set[str] = set()
    for ev in evals:
        first = ev.problem_id not in seen  # a problem's set-up is carried by each of its evaluations: count it once
        seen.add(ev.problem_id)
        for k, v in ev.phase_s.items():
            if first or not k.startswith("ref."):
                by.setdefault(k, []).append(v)
        by.setdefault("total", []).append(ev.wall_s)
    rows = []
    for k, vs in by.items():
        where = "judge: problem set-up (first candidate of a problem)" if k.startswith("ref.") else _WHERE.get(k, "")
        rows.append((k, str(len(vs)), f"{statistics.median(vs):.3f}", f"{sum(vs):.1f}", where))
    return rows


def print_phase_summary(evals: list[Evaluation], title: str = "where the time went") -> None:
    if not evals:
        return
    print_rows(phase_summary(evals), f"{title} ({len(evals)} evaluations)", "evaluations")


def print_rows(rows: list[tuple[str, str, str, str, str]], title: str, count: str = "count") -> None:
    """A (phase, count, median s, total s, where) table, as `--timings` prints it."""
    if not rows:
        return
    table = Table("phase", count, "median s", "total s", "where", title=title)
    for row in rows:
        table.add_row(*row)
    Console().print(table)
