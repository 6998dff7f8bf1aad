"""LocalSandbox: evaluate candidates through a judge process per device, on this machine.

The parent (this process: the CLI, `optimize`'s graph, a `bench` lane) never imports torch for an
evaluation and never runs candidate code. It checks the source statically, then asks the device's
judge (`sandbox/judge/boot.py`, then `serve.py`), which prepares the problem once, runs the candidate in a fresh runner
and returns the Evaluation. A judge that dies or hangs is an `infra_error`, never a traceback.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from kevolve.contract import ProblemError, ProblemTooLarge, check_solution_source
from kevolve.records import Candidate, Evaluation, Outcome, Problem
from kevolve.sandbox.config import SandboxConfig
from kevolve.sandbox.isolate.memory import oom_killed, oom_kills, oom_reason, peak_rss_bytes
from kevolve.sandbox.common.protocol import JudgeReply, Progress, ReferenceSummary

log = logging.getLogger(__name__)


_EXIT_WAIT_S = 30.0  # seconds to wait for a lost judge's exit status (JudgeClient._raise_if_oom)


class JudgeLost(Exception):
    """The judge process died or stopped answering (the machine's fault, retried by callers)."""


class JudgeOutOfMemory(JudgeLost):
    """The kernel's out-of-memory killer ended the judge (it holds the problem's inputs and truth)."""

    def __init__(self, peak: int | None) -> None:
        super().__init__("the judge was ended by the kernel's out-of-memory killer")
        self.peak = peak


class JudgeClient:
    """The parent's end of one judge process (one per device and lane)."""

    def __init__(self, device: str, lane_cores: set[int] | None = None, spare_cores: set[int] | None = None,
                 root: Path | None = None, spares: int = 1, keep_scratch: bool = False, runners: str = "") -> None:
        """`runners`: the first request's runner settings (JSON, config.RUNNER_FIELDS and the device), which the
        judge starts its first runners from before it imports torch (judge/boot.py)."""
        from kevolve.sandbox.common.channel import Channel
        from kevolve.sandbox.isolate.launch import default_scratch_root, is_private, scrubbed_env
        from kevolve.sandbox.isolate.procfs import hide_environ, set_dumpable

        # this process holds the LLM keys and the archive's URL, and without bubblewrap a candidate's runner is a
        # process of the same user: its memory and environment are closed to them (procfs.set_dumpable; a debugger
        # of the same user, not root, cannot attach either while it runs), and the keys are gone from the
        # environment block /proc/PID/environ shows (procfs.hide_environ: a root runner still read it on 6.18)
        set_dumpable(False)
        hide_environ(is_private)
        self.device = device
        self.dir = Path(tempfile.mkdtemp(prefix="kevolve-judge-", dir=root or default_scratch_root()))
        to_judge_r, to_judge_w = os.pipe()
        from_judge_r, from_judge_w = os.pipe()
        env = scrubbed_env(device, self.dir)
        env.pop("OMP_NUM_THREADS", None)  # the judge sizes its own threads to its cores
        from kevolve.sandbox.isolate import pycache

        env[pycache.ROOT_VAR] = str(pycache.default_root())  # the user's cache, not the judge's scratch HOME
        # the judge's own switches (side by side, tests)
        for var in ("KEVOLVE_FUSED_COMPARE", "KEVOLVE_RESIDENCY", "KEVOLVE_REMADE_TIMING", "KEVOLVE_GPU_FENCE",
                    "KEVOLVE_GPU_TIMING_DRAWS", "KEVOLVE_GPU_NET", "KEVOLVE_GATE"):
            if var in os.environ:
                env[var] = os.environ[var]
        cores = lambda c: ",".join(map(str, sorted(c))) if c else ""  # noqa: E731
        with open(self.dir / "judge.log", "wb") as logf:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kevolve.sandbox.judge.boot", device, cores(lane_cores), cores(spare_cores),
                 f"{to_judge_r},{from_judge_w}", str(spares), "keep" if keep_scratch else "", str(root or ""), runners],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, cwd=self.dir, env=env,
                pass_fds=(to_judge_r, from_judge_w), start_new_session=True)
        os.close(to_judge_r)
        os.close(from_judge_w)
        self.ch = Channel(from_judge_r, to_judge_w)
        self.lock = threading.Lock()
        self.oom_before, self.peak = oom_kills(), 0  # to tell a death by the OOM killer from others
        self.containers = False  # asked for Docker runners: on close, remove what a killed judge left

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, msg: dict[str, Any], timeout_s: float,
                progress: Callable[[Progress], None] | None = None) -> JudgeReply:
        """The judge's answer to `msg`; the phases it reports on the way go to `progress`."""
        from kevolve.sandbox.common.channel import ChannelClosed, Garbled

        if (msg.get("config") or {}).get("backend") == "docker":
            self.containers = True
        with self.lock:
            try:
                self.ch.send(msg, alive=self.alive)
                deadline = time.monotonic() + timeout_s
                while True:
                    reply = self.ch.recv(min(1.0, max(0.0, deadline - time.monotonic())))
                    if isinstance(reply, dict) and set(reply) == {"progress"}:  # sandbox/judge/progress.py
                        if progress is not None and (p := Progress.read(reply["progress"])) is not None:
                            progress(p)
                        continue
                    if reply is not None:
                        return JudgeReply.model_validate(reply)
                    self.peak = max(self.peak, peak_rss_bytes(self.proc.pid) or 0)
                    if not self.alive():
                        self._raise_if_oom()
                        raise JudgeLost(f"the judge {self._exit_note()} ({self._tail()})")
                    if time.monotonic() >= deadline:
                        raise JudgeLost(f"the judge gave no answer in {timeout_s:.0f} s")
            except (ChannelClosed, Garbled, ValueError) as e:
                self._raise_if_oom()
                raise JudgeLost(f"the judge's channel broke: {e}; the judge {self._exit_note()} ({self._tail()})") from None

    def _raise_if_oom(self) -> None:
        """JudgeOutOfMemory if the judge is gone because the kernel's OOM killer ended it.

        A closed channel comes before the exit status, and a judge that held tens of GB takes seconds to
        die (the H100, 2026-11-25: a judge holding a 6.4 GB-a-tensor softmax's draws closed its channel and
        was still exiting 5 s later; its verdict said only "peer closed"): wait for the status up to
        _EXIT_WAIT_S. A judge whose channel is closed answers nothing more, so the wait loses nothing."""
        try:
            self.proc.wait(timeout=_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return
        if oom_killed(self.proc.returncode, self.oom_before):
            raise JudgeOutOfMemory(self.peak or None)

    def _exit_note(self) -> str:
        """How the judge ended, for an infra_error: 'exited with status N', 'was killed by SIGKILL', or
        'did not exit' (still running after the wait)."""
        rc = self.proc.poll()
        if rc is None:
            return f"did not exit within {_EXIT_WAIT_S:g} s"
        if rc < 0:
            try:
                return f"was killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"was killed by signal {-rc}"
        return f"exited with status {rc}"

    def _tail(self) -> str:
        try:
            lines = (self.dir / "judge.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][:200] if lines else ""

    def close(self) -> None:
        t0 = time.monotonic()
        if self.alive():
            try:
                self.request({"op": "shutdown"}, 30.0)
            except JudgeLost:
                pass
        t1 = time.monotonic()
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        if self.containers:  # a judge killed above (or before) could not remove its containers
            from kevolve.sandbox.isolate.container import DockerUnavailable, docker_client, sweep_orphans

            try:
                sweep_orphans(docker_client())
            except DockerUnavailable:
                pass
        if time.monotonic() - t0 > 5.0:  # a judge slow to go holds its device: say where the time went
            log.warning("judge %s (%s) closed in %.1f s: shutdown %.1f s, kill and wait %.1f s", self.proc.pid,
                        self.device, time.monotonic() - t0, t1 - t0, time.monotonic() - t1)
        self.ch.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _budget(config: SandboxConfig) -> float:
    """How long the parent waits for the judge before calling it lost: far beyond any honest job."""
    return 6 * config.timeout_s + 900.0


@dataclass
class LocalSandbox:
    """`Sandbox.evaluate(problem, candidate, config) -> Evaluation` through a judge per device."""

    scratch_root: Path | None = None
    keep_scratch: bool = False
    lane_cores: set[int] | None = None
    spare_cores: set[int] | None = None
    spares: int = 1  # runners each judge keeps started ahead (warm: torch imported, device ready)
    progress: Callable[[Progress], None] | None = None  # told each phase the judge starts (reference, compile, …)
    _judges: dict[str, JudgeClient] = field(default_factory=dict)

    def _judge(self, config: SandboxConfig) -> JudgeClient:
        j = self._judges.get(config.device)
        if j is None or not j.alive():
            if j is not None:
                j.close()
            from kevolve.sandbox.config import RUNNER_FIELDS

            runners = config.model_dump_json(include=set(RUNNER_FIELDS) | {"device"})
            j = self._judges[config.device] = JudgeClient(config.device, self.lane_cores, self.spare_cores,
                                                          self.scratch_root, self.spares, self.keep_scratch, runners)
        return j

    def _ask(self, op: str, config: SandboxConfig, **payload: Any) -> JudgeReply:
        config = SandboxConfig.model_validate(config.model_dump())  # fields set from plain strings become enums
        msg = {"op": op, "config": json.loads(config.model_dump_json()),
               **{k: v.model_dump(mode="json") for k, v in payload.items()}}
        try:
            return self._judge(config).request(msg, _budget(config), self.progress)
        except JudgeOutOfMemory as e:  # the judge holds the problem's data: the problem does not fit here
            self._drop(config.device)
            who = "the judge (which draws the inputs and computes the reference)"
            return JudgeReply(problem_error=oom_reason(who, e.peak, config.memory_limit_gb))
        except JudgeLost as e:
            self._drop(config.device)
            return JudgeReply(infra_error=f"infra_error: {e}")

    def evaluate(self, problem: Problem, candidate: Candidate, config: SandboxConfig) -> Evaluation:
        t0 = time.monotonic()
        early = early_verdict(problem, candidate, config)
        if early is not None:
            return early
        reply = self._ask("evaluate", config, problem=problem, candidate=candidate)
        if reply.problem_error:
            raise _problem_failure(problem, reply.problem_error)
        if reply.evaluation is None:
            return _early(problem, candidate, Outcome.INFRA_ERROR, reply.infra_error or "infra_error: no answer", t0)
        ev = Evaluation.model_validate(reply.evaluation)
        if config.audit and ev.ok:
            ev = self.audit(problem, candidate, config, ev)
        if config.ncu and ev.ok:
            ev = _with_ncu(ev, problem, candidate, config)
        return ev

    def audit(self, problem: Problem, candidate: Candidate, config: SandboxConfig, ev: Evaluation) -> Evaluation:
        """Measure an accepted candidate again (fresh runner, fresh inputs, the judge's own clock).

        Returns `ev` with its audit attached, overturned to `rejected: audit_mismatch` where the audit
        disagrees; anything but an ok evaluation comes back unchanged.
        """
        if not ev.ok:
            return ev
        reply = self._ask("audit", config, problem=problem, candidate=candidate, evaluation=ev)
        if reply.problem_error:
            raise _problem_failure(problem, reply.problem_error)
        if reply.evaluation is None:
            from kevolve.records import Audit

            return ev.model_copy(update={"audit": Audit(passed=False, reason=reply.infra_error or "infra_error")})
        return Evaluation.model_validate(reply.evaluation)

    def reference(self, problem: Problem, config: SandboxConfig) -> ReferenceSummary:
        """Prepare the problem in the judge (draws, truth, baselines); ProblemError if it is broken."""
        reply = self._ask("reference", config, problem=problem)
        if reply.problem_error:
            raise _problem_failure(problem, reply.problem_error)
        if reply.reference is None:  # the machine's fault, not the problem's
            raise JudgeLost(f"{Path(problem.path).name}: {reply.infra_error or 'the judge gave no reference'}")
        return reply.reference

    def forget(self) -> None:
        """Drop what the judges keep about problems (call when a problem is finished)."""
        for j in self._judges.values():
            if j.alive():
                try:
                    j.request({"op": "forget"}, 120.0)
                except JudgeLost:
                    pass

    def _drop(self, device: str) -> None:
        j = self._judges.pop(device, None)
        if j is not None:
            j.close()

    def close(self) -> None:
        for device in list(self._judges):
            self._drop(device)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _problem_failure(problem: Problem, reason: str) -> ProblemError:
    """The exception for the judge's verdict on a problem: too large for the memory limit, or broken."""
    cls = ProblemTooLarge if reason.startswith("memory_limit:") else ProblemError
    return cls(f"{Path(problem.path).name}: {reason}")


def early_verdict(problem: Problem, cand: Candidate, config: SandboxConfig) -> Evaluation | None:
    """The verdict the parent gives before any judge or service is asked (nothing runs, nothing is built): a source
    that is not a solution, or one the candidate policy refuses; None to evaluate it."""
    t0 = time.monotonic()
    bad = check_solution_source(cand.source)
    if bad:
        return _early(problem, cand, Outcome.COMPILE_ERROR, f"compile_error: {bad}", t0)
    policy = _policy(cand.source, config)
    return _early(problem, cand, Outcome.REJECTED, policy, t0) if policy else None


def _early(problem: Problem, cand: Candidate, outcome: Outcome, reason: str, t0: float) -> Evaluation:
    return Evaluation(candidate_id=cand.id, problem_id=problem.id, outcome=outcome, reason=reason,
                      wall_s=time.monotonic() - t0)


def _policy(source: str, config: SandboxConfig) -> str | None:
    """The candidate policy's reason to reject the source before anything runs (sandbox/policy/candidate.py)."""
    from kevolve.sandbox.policy.source import policy_reason

    return policy_reason(source, config.policy_allow)


def _ncu_would_escape(config: SandboxConfig) -> bool:
    """ncu runs the candidate once more as a plain host process (it cannot inject through bwrap's
    network namespace or into a container): only where no sandbox was asked for by name."""
    from kevolve.sandbox.config import Backend, Isolation

    return config.backend is Backend.DOCKER or config.isolation is Isolation.BWRAP


def _with_ncu(ev: Evaluation, problem: Problem, cand: Candidate, config: SandboxConfig) -> Evaluation:
    if _ncu_would_escape(config):
        log.warning("--ncu skipped: Nsight Compute re-runs the candidate outside the sandbox, "
                    "and this configuration asks for one (--sandbox docker / --isolation bwrap)")
        return ev
    from kevolve.sandbox.parent import ncu

    return ncu.attach(ev, problem, cand, config, ev.seeds[0] - 1 if ev.seeds else 0)


__all__ = ["JudgeClient", "JudgeLost", "JudgeOutOfMemory", "LocalSandbox", "early_verdict"]
