"""Trace a KernelBench problem into a torch.fx graph whose nodes carry shapes and dtypes.

Inputs come from the problem's own `get_inputs()` drawn under a FakeTensorMode, so tracing a
problem with multi-gigabyte inputs allocates nothing. A module torch.fx cannot trace (data-dependent
control flow, unsupported Python) gives a `TraceError` with a one-line verdict.
"""

from __future__ import annotations

import logging
import types
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from kevolve.offline.graph.decompose import decompose
from kevolve.records import Problem

log = logging.getLogger(__name__)


class TraceError(ValueError):
    """The module could not be traced; the message is a one-line verdict ('trace_failed: …')."""


@dataclass
class Traced:
    """A traced problem: the fx module (nodes have meta['tensor_meta']) and the reference Model class."""

    gm: torch.fx.GraphModule
    model: torch.nn.Module
    init_args: list[Any]
    input_shapes: list[tuple[int, ...] | None]


def load_namespace(problem: Problem) -> dict[str, Any]:
    """Execute the problem source in a fresh module namespace."""
    mod = types.ModuleType(f"kevolve_problem_{problem.id}")
    mod.__file__ = problem.path
    try:
        exec(compile(problem.source, problem.path, "exec"), mod.__dict__)  # noqa: S102 — the user's own problem
    except Exception as e:  # noqa: BLE001 — any failure is a verdict
        raise TraceError(f"trace_failed: the problem file raised {type(e).__name__}: {e}") from None
    return mod.__dict__


def trace_problem(problem: Problem) -> Traced:
    """Trace `Model` of the problem with torch.fx and propagate fake shapes from `get_inputs()`."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.shape_prop import ShapeProp

    ns = load_namespace(problem)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        init_args = list(ns["get_init_inputs"]())
        with mode:  # parameters are fake too: tracing needs their shapes, not their values
            model = ns["Model"](*init_args)
        model.eval()  # the evaluator runs both models in eval mode (dropout off, batch norm on running stats)
    except Exception as e:  # noqa: BLE001
        raise TraceError(f"trace_failed: Model(*get_init_inputs()) raised {type(e).__name__}: {e}") from None
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as e:  # noqa: BLE001
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise TraceError(f"trace_failed: torch.fx cannot trace Model.forward ({type(e).__name__}: {first[:160]})") from None
    try:
        with mode:
            inputs = list(ns["get_inputs"]())
        ShapeProp(gm).propagate(*inputs)
        if decompose(gm):  # losses, einsum, attention into fusible ops: their new nodes need shapes too
            ShapeProp(gm).propagate(*inputs)
    except Exception as e:  # noqa: BLE001
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise TraceError(f"trace_failed: shape propagation failed ({type(e).__name__}: {first[:160]})") from None
    shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in inputs]
    log.info("traced %s: %d nodes", problem.name, len(gm.graph.nodes))
    return Traced(gm=gm, model=model, init_args=init_args, input_shapes=shapes)

