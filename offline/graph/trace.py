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
from kevolve.offline.graph.capture import LeafShapeProp, capture
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
    except ModuleNotFoundError as e:  # the problem's own dependency (Mamba2's einops), not kevolve's
        raise TraceError(f"trace_failed: the problem imports {e.name!r}, which is not installed "
                         f"(pip install {str(e.name).split('.')[0]})") from None
    except Exception as e:  # noqa: BLE001 — any failure is a verdict
        raise TraceError(f"trace_failed: the problem file raised {type(e).__name__}: {e}") from None
    return mod.__dict__


def _build_model(ns: dict[str, Any], mode: Any) -> tuple[torch.nn.Module, list[Any]]:
    """`Model(*get_init_inputs())` in eval mode (as the evaluator runs it: dropout off, batch norm on running
    statistics), with fake parameters: tracing needs their shapes, not their values. A constructor that
    needs values (`x.item()` of a `torch.linspace`, as Swin's drop-path rates) builds real ones instead."""
    try:
        init_args = list(ns["get_init_inputs"]())
    except Exception as e:  # noqa: BLE001
        raise TraceError(f"trace_failed: get_init_inputs() raised {type(e).__name__}: {e}") from None
    try:
        with mode:
            return ns["Model"](*init_args).eval(), init_args
    except Exception as e:  # noqa: BLE001
        log.info("Model() on fake tensors raised %s: built with real parameters", type(e).__name__)
    try:
        return ns["Model"](*init_args).eval(), init_args
    except Exception as e:  # noqa: BLE001
        raise TraceError(f"trace_failed: Model(*get_init_inputs()) raised {type(e).__name__}: {e}") from None


def trace_problem(problem: Problem) -> Traced:
    """Trace `Model` of the problem with torch.fx and propagate fake shapes from `get_inputs()`."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    ns = load_namespace(problem)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    model, init_args = _build_model(ns, mode)
    try:
        with mode:
            inputs = list(ns["get_inputs"]())
    except Exception as e:  # noqa: BLE001
        raise TraceError(f"trace_failed: get_inputs() raised {type(e).__name__}: {e}") from None
    try:
        gm = capture(model, inputs, mode)
    except Exception as e:  # noqa: BLE001
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise TraceError(f"trace_failed: torch.fx cannot trace Model.forward ({type(e).__name__}: {first[:160]})") from None
    try:
        with mode:
            LeafShapeProp(gm, mode).propagate(*inputs)
            if decompose(gm):  # losses, einsum, attention into fusible ops: their new nodes need shapes too
                LeafShapeProp(gm, mode).propagate(*inputs)
    except Exception as e:  # noqa: BLE001
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise TraceError(f"trace_failed: shape propagation failed ({type(e).__name__}: {first[:160]})") from None
    shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in inputs]
    log.info("traced %s: %d nodes", problem.name, len(gm.graph.nodes))
    return Traced(gm=gm, model=model, init_args=init_args, input_shapes=shapes)

