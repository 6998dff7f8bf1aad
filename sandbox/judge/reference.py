"""The reference's arithmetic: float64 truth, eager's own error against it, the work it does, and
the in-process baseline timing `kevolve bench baselines` uses (the judge, sandbox/judge/oracle.py, uses the
rest; it runs in a trusted process apart from any candidate).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import torch

from kevolve.records import TimingStats
from kevolve.sandbox.common import harness as h
from kevolve.sandbox.judge.correctness import error_stats
from kevolve.sandbox.common.protocol import WorkerRequest
from kevolve.sandbox.common.timing import Timer


def _as_f64(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.double()
    return x


def eager_errors(y: list[torch.Tensor], y64: list[torch.Tensor] | None) -> tuple[tuple[float, float, float], ...]:
    """Eager's own (max-norm, 2-norm) relative error against float64 and its count of far elements, per output."""
    if y64 is None:
        return tuple((0.0, 0.0, 0.0) for _ in y)
    errs = []
    for a, t in zip(y, y64, strict=True):
        if not a.is_floating_point():
            errs.append((0.0, 0.0, 0.0))
            continue
        errs.append(error_stats(a, t, torch.isfinite(t)))
    return tuple(errs)


def with_own_variation(errs: tuple[tuple[float, ...], ...], y: list[torch.Tensor],
                       again: list[torch.Tensor]) -> tuple[tuple[float, ...], ...]:
    """Eager's error widened by how far a second forward on the same inputs lands from the first, per output.

    A reference that draws inside its forward (KernelBench L3 35: `h0 = torch.randn(…)` each call) differs from
    itself call to call; its float64 run fails or draws again, so the truth is one of its own samples and eager's
    error read 0: a 6-layer LSTM over 512 steps then held every candidate to 1e-5 while two eager calls differ by
    ~5e-5 (H100, 2026-11-27). What the reference itself cannot repeat is not the candidate's error. A forward that
    varies by more than OWN_VARIATION_MAX is refused before this (`own_variation`, oracle.prepare)."""
    cap = OWN_VARIATION_MAX
    return tuple(e if d is None else (max(e[0], min(d[0], cap)), max(e[1], min(d[1], cap)), max(e[2], d[2]))
                 for e, d in zip(errs, _variations(y, again), strict=True))


def own_variation(y: list[torch.Tensor], again: list[torch.Tensor]) -> float:
    """The largest relative (max-norm) difference between two forwards' outputs on the same inputs."""
    return max((d[0] for d in _variations(y, again) if d is not None), default=0.0)


def _variations(y: list[torch.Tensor], again: list[torch.Tensor]) -> list[tuple[float, float, float] | None]:
    return [error_stats(b, a, torch.isfinite(a)) if a.is_floating_point() and a.shape == b.shape else None
            for a, b in zip(y, again, strict=True)]


# A reference whose outputs move more than this between two calls on the same inputs (relative max-norm) has no
# truth to judge by: KernelBench L2 66 and 83 (dropout 0.2 in training mode) read 0.33-0.68 against their own float64
# run, which was eager's error, so a tolerance of 8x that let any output through (found 2026-11-27). L3 35's
# per-call random state moves its output by ~5e-5.
OWN_VARIATION_MAX = 1e-3


def truth_of(y: list[torch.Tensor], y64: list[torch.Tensor] | None) -> list[torch.Tensor]:
    """What candidates are judged against: float64 results rounded to the output dtype."""
    if y64 is None:
        return y
    return [t.to(a.dtype) if a.is_floating_point() else a for a, t in zip(y, y64, strict=True)]


class _Float64:
    """The reference computed in float64, on the device if it can, else on the CPU."""

    def __init__(self, model: Any, device: torch.device) -> None:
        self.device = device
        self.model = copy.deepcopy(model).double() if isinstance(model, torch.nn.Module) else model

    def __call__(self, inputs: list[Any]) -> list[torch.Tensor] | None:
        for dev in (self.device, torch.device("cpu")):
            for default_f64 in (False, True):
                try:
                    return self._run(inputs, dev, default_f64)
                except Exception:  # noqa: BLE001 - some ops have no float64 kernel on some devices (or no room)
                    continue
        return None

    def _run(self, inputs: list[Any], dev: torch.device, default_f64: bool) -> list[torch.Tensor]:
        """The float64 forward on `dev`; with `default_f64`, tensors the forward makes itself without a dtype
        (`h0 = torch.randn(…)` in KernelBench L3 35's LSTM) are float64 too: made float32, they stopped the float64
        run (an LSTM's weights and state must agree), and the truth fell back to eager's own output, eager's error
        to 0, and the tolerance to the 1e-5 floor (the offline LSTM `reduced_precision` at 5.2e-5, H100 2026-11-27).
        Tried second, so a forward that runs as it is keeps its float64 result unchanged."""
        m = self.model.to(dev) if isinstance(self.model, torch.nn.Module) else self.model
        before = torch.get_default_dtype()
        try:
            if default_f64:
                torch.set_default_dtype(torch.float64)  # the judge's own process: no candidate code runs here
            with torch.no_grad():
                out = m(*[_as_f64(h.to_device(x, dev)) for x in inputs])
        finally:
            torch.set_default_dtype(before)
        return [t.detach() for t in h.flatten_outputs(out)]  # left where computed: no round trip


_WARM = None  # the warm-up thread's lock: _work waits for it rather than paying the same cost twice


def _flop_mode() -> Any:
    """A dispatch mode that sums torch's FLOP formulas (torch.utils.flop_counter's registry) over the ops run.

    Not torch's FlopCounterMode: any dispatch mode whose handler torch wraps to keep Dynamo out imports
    torch._dynamo on first use, 3.9 CPU-s of a CPU judge's start (2026-11-27, 2 cores), and the judge never
    compiles in its own process. Same totals as FlopCounterMode (a conv-relu-linear model: 1,065,600 both)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class FlopCount(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

        def __init__(self) -> None:
            super().__init__()
            self.flops = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            count = flop_registry.get(func._overloadpacket)
            if count is not None:
                self.flops += count(*args, **kwargs, out_val=out)
            return out

    return FlopCount()


def warm_flop_counter() -> None:
    """Use the FLOP counter once on a tiny CPU op (its imports are slow); _work then waits for this."""
    global _WARM
    import threading

    lock = _WARM = threading.Lock()
    with lock:
        try:
            x = torch.ones(8, 8)
            with _flop_mode():
                torch.relu(x @ x)
        except Exception:  # noqa: BLE001 - only a warm-up
            pass


def _work(model: Any, x: list[Any]) -> tuple[int | None, int | None]:
    """Least bytes any implementation moves, and the FLOPs torch's formulas count (None if 0)."""
    if _WARM is not None:
        with _WARM:
            pass

    nbytes = sum(t.numel() * t.element_size() for t in x if isinstance(t, torch.Tensor))
    if isinstance(model, torch.nn.Module):
        nbytes += sum(p.numel() * p.element_size() for p in model.parameters())
        nbytes += sum(b.numel() * b.element_size() for b in model.buffers())
    try:
        with _flop_mode() as counter:
            out = model(*x)
        nbytes += sum(t.numel() * t.element_size() for t in h.flatten_outputs(out) if isinstance(t, torch.Tensor))
        flops = counter.flops
    except Exception:  # noqa: BLE001 - an op the counter cannot trace: bytes only
        return nbytes or None, None
    return nbytes or None, flops or None


def compile_reference(model: Any, pool: list[list[Any]], device: torch.device) -> tuple[Any | None, str]:
    """torch.compile (inductor, default) of the model and its first call, where Inductor compiles.

    Returns (the compiled callable, '') or (None, why not): torch.compile failing is data, not a
    problem error. Kept apart from timing so that `kevolve bench baselines` compiles while another
    problem is timed.
    """
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*pool[0])
        h.sync(device)
    except Exception as e:  # noqa: BLE001
        return None, f"torch.compile baseline unavailable: {h.one_line(e)}"
    return compiled, ""


def time_baselines(req: WorkerRequest, model: Any, compiled: Any | None, pool: list[list[Any]], keys: list[str],
                   phases: dict[str, float], scratch: Path | None = None,
                   ) -> tuple[TimingStats, TimingStats | None, str]:
    """Eager, then the already compiled model (from `compile_reference`) when given, timed exactly
    as candidates are.

    Returns (eager, compile or None, log line); fills `phases`. The compiled model failing while
    timed is data (the log says why), not a problem error.
    """
    device = h.device_of(req.device)
    timer = Timer(device)
    if scratch is not None:
        h.set_phase(scratch, "timing")
    t0 = time.perf_counter()
    with torch.no_grad():
        timing = timer.run(model, pool, keys, req.trials, req.max_timing_s, req.warmup)
    phases["reference_timing"] = time.perf_counter() - t0
    compile_timing, log = None, ""
    if compiled is not None:
        if scratch is not None:
            h.set_phase(scratch, "compile_baseline")
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                compile_timing = timer.run(compiled, pool, keys, req.trials, req.max_timing_s, req.warmup)
        except Exception as e:  # noqa: BLE001
            log = f"torch.compile baseline unavailable: {h.one_line(e)}"
        phases["compile_baseline"] = time.perf_counter() - t0
    return timing, compile_timing, log
