"""A bench's timeline: what each lane and the build service did outside evaluations, written as it happens.

`timeline.jsonl` in the run folder, one JSON object a line, flushed at once so that a bench stopped by a
budget (`kill -9`) still shows where its time went: `t` is the span's start in seconds since the bench
started, `s` its length, `what` one of SPANS, plus `lane`, `problem`, `label` or `key` where they apply.
`summary` turns the lines into `--timings`' rows (phase, count, median s, total s, where); scripts/
bench_throughput.py reads the same file after a budget's kill.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

FILE = "timeline.jsonl"

# what: where (the row's last column); the order is the table's
SPANS = {
    "lane_start": "lane: the bench's start until its sandbox was made (build service started, judge)",
    "reference": "lane: a problem's reference prepared (set-up, judge)",
    "build_wait": "lane: waited for a candidate's build (nothing else evaluable)",
    "evaluation": "lane: one candidate evaluated (its wall)",
    "forget": "lane: a finished problem's reference let go (its pinned host copies freed)",
    "pch": "build service: a precompiled header built",
    "build": "build service: one extension built (a worker's wall)",
    "build_queue": "build service: an extension queued before a worker took it",
}


class Timeline:
    """Appends spans to `path` (thread-safe); `t` counts from this object's creation."""

    def __init__(self, path: Path) -> None:
        self.path, self.t0 = path, time.monotonic()
        self._lock = threading.Lock()
        self._n = 0
        path.write_text(json.dumps({"what": "bench_start", "t": 0.0, "s": 0.0, "unix": time.time(),
                                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")

    def now(self) -> float:
        return time.monotonic() - self.t0

    def begin(self, what: str, **fields: Any) -> tuple[str, float, dict[str, Any]]:
        """A span that starts now, written at once as `begun` (a kill before its end still shows it)."""
        start = self.now()
        with self._lock:
            self._n += 1
            fields = {**fields, "id": self._n}
        self.add("begun", start, 0.0, of=what, **fields)
        return what, start, fields

    def end(self, token: tuple[str, float, dict[str, Any]], **more: Any) -> None:
        what, start, fields = token
        self.add(what, start, self.now() - start, **fields, **more)

    def add(self, what: str, start: float, seconds: float, **fields: Any) -> None:
        line = json.dumps({"what": what, "t": round(start, 4), "s": round(seconds, 4), **fields})
        with self._lock, open(self.path, "a") as f:
            f.write(line + "\n")


def read(path: Path) -> list[dict[str, Any]]:
    """The file's spans; a line cut by a kill is skipped."""
    out = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def summary(spans: list[dict[str, Any]], wall_s: float | None = None, ended_unix: float | None = None,
            ) -> list[tuple[str, str, str, str, str]]:
    """(phase, count, median s, total s, where): each kind of span, then the bench's start until its first
    evaluation and, per lane, the time in none of its spans (`lane idle`). The bench ended `wall_s` after its
    start, or at `ended_unix` (time.time() of a kill seen from outside), or else at its last span's end."""
    start = next((sp for sp in spans if sp.get("what") == "bench_start"), {})
    if wall_s is None and ended_unix is not None and "unix" in start:
        wall_s = ended_unix - float(start["unix"])
    by: dict[str, list[float]] = {}
    for sp in spans:
        if sp.get("what") in SPANS:
            by.setdefault(sp["what"], []).append(float(sp["s"]))
    rows = [(f"timeline.{k}", str(len(by[k])), f"{statistics.median(by[k]):.3f}", f"{sum(by[k]):.1f}", where)
            for k, where in SPANS.items() if k in by]
    end = wall_s if wall_s is not None else max((float(sp["t"]) + float(sp["s"]) for sp in spans), default=0.0)
    ended = {sp["id"] for sp in spans if sp.get("what") in SPANS and "id" in sp}
    cut = [sp for sp in spans if sp.get("what") == "begun" and sp.get("id") not in ended]
    for sp in cut:  # in flight when the bench stopped: counted to its end (a lane's share of the idle below)
        sp.update(what=sp["of"], s=max(0.0, end - float(sp["t"])))
        rows.append((f"timeline.{sp['of']} (unfinished)", "1", f"{sp['s']:.3f}", f"{sp['s']:.1f}",
                     f"in flight when the bench stopped: {' '.join(str(sp[k]) for k in ('problem', 'label') if k in sp)}"
                     .rstrip(": ")))
    submitted = sum(int(sp.get("n", 0)) for sp in spans if sp.get("what") == "builds_submitted")
    if (left := submitted - len(by.get("build", []))) > 0:
        rows.append(("timeline.build (unfinished)", str(left), "", "",
                     "extensions the build service had not finished (building or queued) when the bench stopped"))
    evals = [sp for sp in spans if sp.get("what") == "evaluation"]
    if evals:
        first = min(float(sp["t"]) for sp in evals)
        rows.append(("timeline.until_first_evaluation", "1", f"{first:.3f}", f"{first:.1f}",
                     "the bench's start until its first evaluation began"))
    lanes = sorted({sp["lane"] for sp in spans if sp.get("lane")})
    idle = []
    for lane in lanes:
        busy = sum(float(sp["s"]) for sp in spans if sp.get("lane") == lane and sp.get("what") in SPANS)
        idle.append(max(0.0, end - busy))
    if idle:
        rows.append(("timeline.lane_idle", str(len(idle)), f"{statistics.median(idle):.3f}", f"{sum(idle):.1f}",
                     "lane: in none of its spans (the bench's wall less them: waiting for the queue, shutdown)"))
    return rows


__all__ = ["FILE", "SPANS", "Timeline", "read", "summary"]
