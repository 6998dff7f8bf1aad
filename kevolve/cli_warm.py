"""`kevolve eval` through the warm judge service (sandbox/parent/warm_service.py): when it may, and what it prints
when it cannot (one line on stderr; the evaluation then runs cold). Light at import (no torch, no sandbox)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from kevolve.records import Candidate, Evaluation, Problem

IDLE_HELP = ("seconds the warm judge service waits for the next evaluation before it exits (default: "
             "$KEVOLVE_WARM_IDLE_S, else 600)")


@dataclass(frozen=True)
class WarmResult:
    """A verdict from the service, with what says it came from there."""

    evaluation: Evaluation
    pid: int
    served: int  # evaluations this service has made, this one included
    prepared_ahead: bool  # its problem data was ready before the request came
    wait_s: float  # the client's wall time from connecting to the answer
    phases: tuple[tuple[str, float, str], ...] = ()  # (name, seconds, where) around the judge's own phases

    def json_field(self) -> dict[str, Any]:
        return {"pid": self.pid, "served": self.served, "prepared_ahead": self.prepared_ahead}

    def timing_rows(self) -> list[tuple[str, str, str, str]]:
        how = ("its problem data (the ref. rows) prepared ahead, while the service was idle" if self.prepared_ahead
               else "its problem data prepared now")
        return [(name, f"{s:.3f}", "", where) for name, s, where in self.phases] + [
            ("warm service", f"{self.wait_s:.3f}", "", f"pid {self.pid}, evaluation {self.served} since it started; "
             f"{how}; the client's wait, connecting to answer")]


def warm_allowed(flag: bool, keep_scratch: bool, ncu: bool, sandbox: str) -> bool:
    """Whether this evaluation may go through the service: not turned off (--no-warm, KEVOLVE_WARM=0), nothing the
    service does not do (it keeps no scratch, runs no ncu, drives local runners only), on Linux (it asks the kernel
    who its peer is: SO_PEERCRED, /proc)."""
    off = os.environ.get("KEVOLVE_WARM", "").strip().lower() in ("0", "off", "no", "false")
    return flag and not off and not keep_scratch and not ncu and sandbox == "local" and sys.platform.startswith("linux")


def idle_seconds(flag: float | None) -> float:
    from kevolve.sandbox.parent.warm_key import DEFAULT_IDLE_S, IDLE_ENV

    if flag is not None:
        return flag
    try:
        return float(os.environ.get(IDLE_ENV, "") or DEFAULT_IDLE_S)
    except ValueError:
        return DEFAULT_IDLE_S


def _hang_seconds() -> float:
    from kevolve.sandbox.parent.warm_key import DEFAULT_HANG_S, HANG_ENV

    try:
        return float(os.environ.get(HANG_ENV, "") or DEFAULT_HANG_S)
    except ValueError:
        return DEFAULT_HANG_S


class _Progress:
    progress = None  # set by report.live_phases while the service evaluates


def evaluate_warm(prob: Problem, cand: Candidate, config: dict[str, Any], device: str | None, backend: str,
                  isolation: str, idle_s: float, quiet: bool) -> WarmResult | str | None:
    """The service's verdict; a problem error's one line (str); None when the service could not make it (the one
    line that says why is already on stderr: evaluate cold)."""
    from kevolve.records import Evaluation
    from kevolve.report import live_phases
    from kevolve.sandbox.parent import warm_client
    from kevolve.sandbox.parent.warm_key import WarmKey, WarmUnavailable

    t0 = time.monotonic()
    shown = _Progress()
    try:
        key = WarmKey.of(device, backend, isolation)
        request = {"problem": prob.model_dump(mode="json"), "candidate": cand.model_dump(mode="json"),
                   "config": config}
        with live_phases(shown, quiet=quiet, audit=bool(config.get("audit"))):
            reply = warm_client.evaluate(key, request, idle_s, _hang_seconds(),
                                         lambda p: shown.progress(p) if shown.progress else None)
    except WarmUnavailable as e:
        typer.echo(f"kevolve: warm judge unavailable ({e}): evaluating cold", err=True)
        return None
    if "problem_error" in reply:
        return str(reply["problem_error"])
    if "evaluation" not in reply:  # not the service's to make (a usage error the cold path words)
        return None
    ev = Evaluation.model_validate(reply["evaluation"])
    return WarmResult(ev, int(reply["pid"]), int(reply["served"]), bool(reply.get("prepared_ahead")),
                      time.monotonic() - t0, _phases(reply, ev))


def _phases(reply: dict[str, Any], ev: Evaluation) -> tuple[tuple[str, float, str], ...]:
    """The service's own steps: connecting (its start when this evaluation started it), waiting behind another
    evaluation or the previous one's preparation, and what the judge's phases do not count (its process's start on
    a new service, the parent's checks, the answer's way back)."""
    rows = [("warm.connect", float(reply.get("connect_s", 0.0)), "client: the service's start (python, kevolve), "
             "then connected" if reply.get("started") else "client: connected to the running service"),
            ("warm.queued", float(reply.get("queued_s", 0.0)), "service: behind another evaluation or the "
             "previous one's next problem")]
    if "evaluate_s" in reply:
        rows.append(("warm.outside_judge", max(0.0, float(reply["evaluate_s"]) - ev.wall_s),
                     "service: the judge's start (a new service: python, torch), source checks, the answer's way"))
    return tuple(rows)


__all__ = ["IDLE_HELP", "WarmResult", "evaluate_warm", "idle_seconds", "warm_allowed"]
