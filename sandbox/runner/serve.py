"""Runner: the untrusted process that runs one model on the judge's command, one call at a time.

Entry point `python -m kevolve.sandbox.runner.serve DEVICE`, started warm (torch imported, device and
profiler initialised) in its scratch directory, talking to the judge over the FIFOs `cmd` / `res`.
The model is a candidate's `ModelNew` or the problem's own `Model` (eager or compiled): every role
runs the same code, so reference and candidate are timed under identical conditions.

A runner holds nothing the verdict depends on. It never loads the problem module next to a
candidate (inputs and constructor arguments arrive as data), never sees the truth or which call
is checked (every call is), and reports each call's times the moment it has them. Whatever it
claims, the judge compares the outputs it staged against the reference itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def _load(job: Any, scratch: Path, device: Any) -> Any:
    """The model this runner serves: candidate ModelNew, or the problem's Model (maybe compiled)."""
    import torch

    from kevolve.sandbox.build import compile as build
    from kevolve.sandbox.build.cache import build_scope
    from kevolve.sandbox.common import harness as h
    from kevolve.sandbox.common.transport import unshare
    from kevolve.sandbox.runner.step import raise_if_refused as refused

    init = unshare(job.init_args, scratch, device)
    if job.role == "candidate":
        build.install_build_hooks(Path(job.cache_dir), Path(job.build_dir) if job.build_dir else None,
                                  build_scope(job.source), check_symbols=job.check_symbols)
        try:
            mod = h.load_module(job.source, "kevolve_candidate", scratch)
        except SystemExit as e:
            refused()
            raise h.StageError("crashed", f"exit: candidate called exit({e.code}) while loading") from None
        except BaseException as e:  # noqa: BLE001 - a failed build or import is a compile error
            refused()
            raise h.StageError("compile_error", h.one_line(e), h.short_traceback(e, 60)) from None
        refused()  # the candidate's code may have caught the refusal and gone on without the module
        cls, who = getattr(mod, "ModelNew", None), "ModelNew"
        if not isinstance(cls, type):
            raise h.StageError("compile_error", "solution defines no ModelNew class")
    else:
        mod = h.load_module(job.source, "kevolve_reference", scratch)
        cls, who = mod.Model, "Model"
    torch.manual_seed(job.init_seed)
    try:
        model = cls(*init)
    except SystemExit as e:
        refused()
        raise h.StageError("crashed", f"exit: candidate called exit({e.code}) in its constructor") from None
    except Exception as e:  # noqa: BLE001
        refused()
        raise h.StageError("runtime_error", f"{who}(*get_init_inputs()) failed: {h.one_line(e)}",
                           h.short_traceback(e)) from None
    refused()
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
        model.eval()
    if job.role == "compiled":
        model = torch.compile(model)
    return model


def _profile_around(device: Any, names: tuple[str, ...]) -> Any:
    from kevolve.sandbox.build import compile as build
    from kevolve.sandbox.common.profile import profile_region

    def around(run: Any, lead: Any = None) -> Any:
        res = profile_region(run, device, names, build.BUILT_MODULES, lead)
        return res.profile, res.unjoined_stream_kernels

    return around


def _ablate(stepper: Any, model: Any, slot: Any, stage: bool) -> Any:
    """One call with the extensions' results replaced by random values (see ablation.py)."""
    from kevolve.sandbox.common import harness as h
    from kevolve.sandbox.runner.ablation import ablated_calls, ablating
    from kevolve.sandbox.common.protocol import StepResult

    try:
        with ablating():
            res, vet = stepper.step(model, slot, stage=stage)
    except h.StageError as e:  # garbage in broke the forward: the kernels' results were needed
        return StepResult(ok=True, staged=False, reason=f"ablation: {e.reason}", ablated=ablated_calls()), _nothing
    return res.model_copy(update={"ablated": ablated_calls()}), vet


def _nothing() -> None:
    pass


def _final(guards: Any, before: dict[str, str], l2_base: int | None, device: Any) -> dict[str, Any]:
    from kevolve.sandbox.common import cuda_rt
    from kevolve.sandbox.runner import torch_settings as settings
    from kevolve.sandbox.common import harness as h
    from kevolve.sandbox.common.protocol import RunnerFinal

    raised = ""
    if device.type == "cuda":
        limit = cuda_rt.persisting_l2_limit()
        if limit is not None and l2_base is not None and limit > l2_base:
            raised = f"{l2_base} -> {limit} bytes"
    return RunnerFinal(tampered=tuple(guards.tampered()), settings_changed=tuple(settings.changed(before)),
                       l2_raised=raised, device_name=h.device_name(device), versions=h.versions()).model_dump()


_PYCACHE = "PYTHONPYCACHEPREFIX"  # where the primed bytecode is (isolate/pycache.py)


def serve(ch: Any, job: Any, scratch: Path, device: Any, guards: Any) -> None:
    """Load the model, then answer `call` / `profile` / `finish` until told to finish."""
    import torch

    from kevolve.sandbox.common import cuda_rt
    from kevolve.sandbox.runner import torch_settings as settings
    from kevolve.sandbox.common import harness as h
    from kevolve.sandbox.common.protocol import StepResult
    from kevolve.sandbox.runner.step import Stepper, now
    from kevolve.sandbox.common.transport import TensorRef, open_ref, unshare
    from kevolve.sandbox.common.gate import Words

    torch.set_num_threads(max(1, job.threads))
    before = settings.snapshot()  # after the judge pinned us, before any of the model's code
    l2_base = cuda_rt.persisting_l2_limit() if device.type == "cuda" else None
    staging = [open_ref(TensorRef.model_validate(r), scratch, device) for r in job.staging]
    # a batch's k-th call stages into set k (set 0: `staging`); a reference's runner stages nothing
    sets = (tuple(staging), *(tuple(open_ref(TensorRef.model_validate(r), scratch, device) for r in refs)
                             for refs in job.staging_sets))
    slots = [unshare(s, scratch, device) for s in job.slots]
    gate = Words(scratch, job.gate) if job.gate else None  # a timed batch's gate (common/gate.py)
    # A reference is trusted code: torch.compile's reference of KernelBench L2 90 left a thread behind a
    # vetted call, its first call already made (H100 under bubblewrap, 2026-11-24: "background_thread", no
    # torch.compile time). The thread rule is for candidates; a reference's outputs are checked as before.
    stepper = Stepper(device, job.outputs, staging, vet_threads=job.role == "candidate",
                      may_alias_inputs=job.may_alias_inputs if job.role == "candidate" else None)
    guards.watch(stepper, "_pad", "_flush_buf", "device", "cuda", "specs", "staging", "vet_threads", "may_alias_inputs")
    holder = _Sets(sets)
    guards.watch(holder, "sets")
    if stepper._pad is not None:
        guards.watch(stepper._pad, "driver", "function", "grid", "launch_fn")
    t0 = now()
    confined = ""
    if job.confine_writes:  # before any of the candidate's code: for good, for everything it starts
        from kevolve.sandbox.isolate import landlock

        # reads: the toolchain, Python, kevolve, the build cache it loads extensions from, the primed bytecode
        reads = [*landlock.runner_reads(), Path(job.cache_dir), *(Path(p) for p in (os.environ.get(_PYCACHE),) if p)]
        if device.type == "cuda":  # the judge's /proc/PID, as all of /proc before: CUDA IPC from it is not yet run
            reads.append(Path(f"/proc/{os.getppid()}"))  # on a GPU with /proc confined (its environ is scrubbed)
        why = landlock.confine([scratch], reads)
        if why:  # asked for and not in force: the candidate's code is not loaded unconfined
            raise h.StageError("infra_error", f"the runner could not confine itself (Landlock): {why}")
        confined = "landlock"
    if job.role == "candidate":  # sockets, clone3, SysV IPC, kernel modules, clocks … (isolate/seccomp.py)
        from kevolve.sandbox.isolate import seccomp

        if seccomp.supported():
            why = seccomp.install()
            if why:
                raise h.StageError("infra_error", f"the runner could not install its seccomp filter: {why}")
            confined = f"{confined}+seccomp" if confined else "seccomp"
    model = _load(job, scratch, device)
    if job.role != "candidate" and slots:
        # The reference is trusted code that may start threads on its first call (torch.compile's
        # compile workers: every compiled baseline on the H100 failed as background_thread): make that
        # call now, so the vetted calls (which reject a call that leaves a thread behind) come after it
        with torch.no_grad():
            model(*slots[0])
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    if guards.tampered():
        raise h.StageError("rejected", f"tampering: candidate replaced {', '.join(guards.tampered()[:4])}")
    stepper.prepare()
    ch.send({"op": "ready", "load_s": now() - t0, "confined": confined})
    around = _profile_around(device, job.custom_kernel_names)
    while True:
        cmd = ch.recv()
        op = cmd.get("op") if cmd else None
        if op == "finish":
            ch.send(_final(guards, before, l2_base, device))
            return
        nonce = cmd.get("nonce", 0)
        if op == "batch":
            picks = [int(i) for i in cmd["slots"]]  # type: ignore[index]
            stage = [holder.sets[int(j)] if job.staging else () for j in cmd["stage"]]  # type: ignore[index]
            res, vet = stepper.batch(model, [slots[i] for i in picks], stage, str(cmd.get("fence", "full")),
                                     int(cmd.get("null", 0)), gate if cmd.get("gate") else None)
            ch.send(res.model_copy(update={"nonce": nonce}).model_dump())
            # nothing more until the judge has read this runner's CPU time at the account (clock.py): the
            # vetting's work must not run into that reading
            go = ch.recv()
            if not go or go.get("op") != "vet":
                raise h.StageError("crashed", "harness: a batch's account was not followed by its vetting")
            _intact(guards, before)
            vet()
            _intact(guards, before)
            stepper.prepare()
            ch.send(StepResult(ok=True, nonce=nonce, part="vet").model_dump())
            continue
        slot = slots[int(cmd["slot"])]  # type: ignore[index]
        if op == "ablate":
            res, vet = _ablate(stepper, model, slot, bool(job.staging))
        else:
            res, vet = stepper.step(model, slot, stage=bool(job.staging), around=around if op == "profile" else None,
                                    pad_ms=float(cmd.get("pad_ms", 0.05)))
        # Two answers per call: the account as soon as the outputs are staged (the judge's clock stops
        # there and its comparison starts), then the vetting's (the judge reads it before it decides)
        ch.send(res.model_copy(update={"nonce": nonce}).model_dump())
        _intact(guards, before)  # first: a dispatcher kernel that did the work in the staging copy is tampering
        vet()
        _intact(guards, before)  # again once threads it waited for have ended
        stepper.prepare()
        ch.send(StepResult(ok=True, nonce=nonce, part="vet").model_dump())


class _Sets:
    """The staging sets, held where the runner's guards watch them (a frame walk that swaps one is tampering)."""

    def __init__(self, sets: tuple[tuple[Any, ...], ...]) -> None:
        self.sets = sets


def _intact(guards: Any, before: dict[str, str]) -> None:
    """Nothing the harness trusts was replaced, no process setting changed; else a StageError."""
    from kevolve.sandbox.common import harness as h
    from kevolve.sandbox.runner import torch_settings as settings

    bad = guards.tampered()
    if bad:
        raise h.StageError("rejected", f"tampering: candidate replaced {', '.join(bad[:4])}")
    changed = settings.changed(before)
    if changed:
        raise h.StageError("rejected", f"tampering: process setting changed: {changed[0]}")


def kernel_libraries() -> tuple[str, ...]:
    """What every kernel language's runner imports while warm (kevolve/languages.py)."""
    from kevolve.languages import LANGUAGES

    return tuple(m for lang in LANGUAGES.values() for m in lang.warm)


def preimport() -> None:
    """Import the kernel libraries candidates use while warm (CuPy's import was most of a CuPy
    candidate's 0.3-0.6 s `compile` phase on the H100); nothing of theirs is initialised here."""
    import importlib

    for name in kernel_libraries():
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - not installed, or broken: the candidate's own import tells
            pass


def _oom_score_adj(value: int) -> None:
    """Where the kernel's out-of-memory killer looks first (-1000..1000; raising it needs no privilege).

    A runner starts at 1000, so a memory-hungry candidate is ended before the judge that holds the
    problem's inputs and truth (in a 2 GiB cgroup on CI the killer once took the 1.3 GiB judge over a
    hoarding runner still smaller than it). A reference runner goes back to 0: trusted code, and its
    death would cost the problem, not a candidate. A candidate may lower its own to 0 as well; then
    the killer picks by size, as it did before.
    """
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(value))
    except OSError:
        pass


def _channel_fds() -> tuple[int, int] | None:
    """The inherited pipes (`--fds=R,W`, a local runner), or None (a container's: FIFOs in /scratch)."""
    for a in sys.argv[2:]:
        if a.startswith("--fds="):
            r, w = a.removeprefix("--fds=").split(",")
            return int(r), int(w)
    return None


def main() -> None:
    from kevolve.sandbox.isolate.procfs import drop_ptrace, set_dumpable

    # First, while this is the process's only thread: no runner, root or not, reads or writes another process's
    # memory (the judge's, the user's: procfs.drop_ptrace; ptrace itself is refused by the candidate's seccomp filter)
    drop_ptrace()
    # Until its job says it runs a candidate, this runner may become a problem's trusted reference:
    # nothing of the same user gets at its descriptors or memory meanwhile (procfs.set_dumpable)
    set_dumpable(False)
    fds = _channel_fds()
    if fds is not None:
        for fd in fds:
            os.set_inheritable(fd, False)  # not handed on to what it runs (compile workers, a candidate's programs)
    _oom_score_adj(1000)  # before torch: everything this process starts inherits it
    import torch
    import torch.utils.cpp_extension  # noqa: F401 - imported before candidate code can patch it

    from kevolve.sandbox.runner import integrity
    from kevolve.sandbox.common import harness as h
    from kevolve.sandbox.common.channel import Channel
    from kevolve.sandbox.common.profile import warm_up
    from kevolve.sandbox.common.protocol import RunnerJob, StepResult
    from kevolve.sandbox.runner.step import is_cuda_error

    scratch = Path.cwd()
    device = h.device_of(sys.argv[1] if len(sys.argv) > 1 else "cpu")
    if device.type == "cuda":
        torch.empty(1, device=device)
    warm_up(device)  # the profiler's first use costs seconds (5.7 s on an H100): pay it while warm
    if device.type == "cuda":
        preimport()
    guards = integrity.Guards(runner_modules())
    ch = Channel(*fds) if fds is not None else Channel.fifos(scratch, "cmd", "res")
    ch.send({"op": "warm", "pid": os.getpid()})
    try:
        job = RunnerJob.model_validate(ch.recv())
        if job.role != "candidate":
            _oom_score_adj(0)
        else:
            set_dumpable(True)  # untrusted anyway: the judge's memory watch reads its smaps as before
        serve(ch, job, scratch, device, guards)
    except h.StageError as e:
        ch.send(StepResult(ok=False, status=e.status, reason=e.reason, log=e.log[-4000:]).model_dump())  # type: ignore[arg-type]
    except BaseException as e:  # noqa: BLE001 - anything else escaping is still a verdict
        code = "cuda_error" if is_cuda_error(e) else "harness"
        ch.send(StepResult(ok=False, status="crashed", reason=f"{code}: {h.one_line(e)}",
                           log=h.short_traceback(e)).model_dump())
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def runner_modules() -> list[ModuleType]:
    """kevolve's own modules loaded in a runner: their functions and methods are guarded too."""
    from kevolve.sandbox.common import channel, cuda_rt, harness, profile, timing, transport
    from kevolve.sandbox.build import cache, compile
    from kevolve.sandbox.runner import integrity, pad, step
    from kevolve.sandbox.runner import torch_settings as settings

    return [timing, integrity, harness, profile, step, sys.modules[__name__], transport, channel, settings, compile,
            cache, cuda_rt, pad]

if __name__ == "__main__":
    main()
