"""Capture a module as a torch.fx graph where plain `symbolic_trace` gives up.

Two ways past what fx cannot trace, both sound for KernelBench problems, whose input shapes are fixed
and which every candidate guards (`emit._guards`: another shape runs the reference forward):

- **values while tracing.** Every node also gets its value on fake tensors as it is recorded, so a
  shape read (`x.size()`, `x.shape`, `len(x)`), arithmetic on it, and a comparison of metadata
  (`x.device != w.device`) are Python constants, not proxies: slicing with sizes (`bias[:, :, :T, :T]`),
  `range(T)`, `if B > 1` and tuple unpacking trace. A value that needs the data (`if x.sum() > 0`)
  has none on fake tensors, so it still fails;
- **leaves.** When tracing fails inside a submodule, that submodule (the innermost one that failed)
  becomes a `call_module` leaf kept in PyTorch and tracing starts again; the rest is still optimised.
  The root's own forward cannot be a leaf: a failure there is a `TraceError`.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx
from torch.fx.node import map_aggregate
from torch.fx.passes.shape_prop import ShapeProp

log = logging.getLogger(__name__)

VALUE = "kv_value"
"""node.meta key: the node's value on fake tensors, set while tracing (absent where it could not be computed)"""

_MISSING = object()
_SCALAR_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64}
_CONST = (int, float, bool, str, type(None), torch.Size, torch.dtype, torch.device)


def _plain(v: Any) -> bool:
    """A value that is a Python constant (no tensor inside): sizes, flags, dtypes."""
    if isinstance(v, (tuple, list)):
        return all(_plain(x) for x in v)
    return isinstance(v, _CONST) and not isinstance(v, torch.SymInt)


class ValueProxy(torch.fx.Proxy):
    """A proxy that answers shape questions from its node's fake value."""

    def _value(self) -> Any:
        return self.node.meta.get(VALUE, _MISSING)

    def __getattr__(self, k: str) -> Any:
        v = self._value()
        if isinstance(v, torch.Tensor) and k in ("shape", "ndim", "size", "dim", "numel"):
            return getattr(v, k)  # fake tensors answer with concrete ints (sizes are not symbolic here)
        return super().__getattr__(k)

    def __len__(self) -> int:
        v = self._value()
        if isinstance(v, (torch.Tensor, tuple, list)):
            return len(v)
        return super().__len__()


def _opaque_functions() -> tuple[Callable[..., Any], ...]:
    """Tensor functions of libraries a problem imported that reject fx's proxies (einops checks the tensor
    type): recorded as call_function nodes, evaluated on fake tensors, kept as library calls."""
    import sys

    einops = sys.modules.get("einops")
    return tuple(getattr(einops, n) for n in ("rearrange", "reduce", "repeat", "einsum") if hasattr(einops, n))


class CaptureTracer(torch.fx.Tracer):
    """fx's tracer with fake values on nodes (see the module docstring) and chosen submodules as leaves."""

    def __init__(self, inputs: dict[str, Any], leaves: frozenset[str], mode: Any) -> None:
        super().__init__(autowrap_functions=_opaque_functions())
        # a buffer read in forward is a get_attr node with a value: sliced with constant sizes
        # (`bias[:, :T, :T]`) it would otherwise be computed here, once, and baked in as a constant
        self.proxy_buffer_attributes = True
        self.inputs = inputs
        """the fake value of each placeholder, by parameter name"""
        self.leaves = leaves
        """qualified names of submodules kept as call_module leaves (beside torch.nn's own)"""
        self.mode = mode
        """the FakeTensorMode the module's parameters and the inputs were made in"""
        self.stack: list[str] = []
        self.evaluating = False
        """True while a node's fake value is computed: modules and attributes are then plain Python"""
        self.failed_in: str | None = None
        """the innermost submodule a tracing failure passed through ('' for the root's own forward)"""

    def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
        return ValueProxy(node, self)

    def create_arg(self, a: Any) -> Any:
        # `dtype=bool` (Mamba2's mask): torch reads a Python scalar type as its dtype; fx has no spelling for it
        if isinstance(a, type) and a in _SCALAR_DTYPES:
            return _SCALAR_DTYPES[a]
        return super().create_arg(a)

    def is_leaf_module(self, m: torch.nn.Module, qualname: str) -> bool:
        return qualname in self.leaves or super().is_leaf_module(m, qualname)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        if self.evaluating:  # fx patches Module.__getattr__ while tracing; a fake run must see the tensors
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def call_module(self, m: torch.nn.Module, forward: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        if self.evaluating:  # and Module.__call__: a fake run calls the module, it records nothing
            return forward(*args, **kwargs)
        self.stack.append(self.path_of_module(m))
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:
            if self.failed_in is None:  # the innermost module the failure passed through
                self.failed_in = self.stack[-1]
            raise
        finally:
            self.stack.pop()

    def create_proxy(self, kind: str, target: Any, args: tuple, kwargs: dict, name: str | None = None,
                     type_expr: Any = None, proxy_factory_fn: Any = None) -> Any:
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        value = self._evaluate(kind, target, args, kwargs)
        if value is _MISSING:
            return proxy
        # fx's Attribute proxy (`x.device`) makes its getattr node lazily and reads `.node` off what this returns
        lazy_attr = kind == "call_function" and target is getattr
        if kind not in ("placeholder", "get_attr") and not lazy_attr and _plain(value):
            # a shape read or metadata comparison: a constant under the candidate's shape guard
            self.graph.erase_node(proxy.node)
            return value
        proxy.node.meta[VALUE] = value
        return proxy

    def to_bool(self, obj: torch.fx.Proxy) -> bool:
        v = obj.node.meta.get(VALUE, _MISSING)
        if _plain(v):
            return bool(v)
        return super().to_bool(obj)  # data-dependent: fx's TraceError, which makes the caller's module a leaf

    def iter(self, obj: torch.fx.Proxy) -> Iterator:
        v = obj.node.meta.get(VALUE, _MISSING)
        if isinstance(v, (tuple, list, torch.Tensor)):
            return iter([obj[i] for i in range(len(v))])
        return super().iter(obj)

    def _evaluate(self, kind: str, target: Any, args: tuple, kwargs: dict) -> Any:
        """The value of a node being recorded, on fake tensors; _MISSING where it cannot be had."""
        if kind == "placeholder":
            return self.inputs.get(str(target).lstrip("*"), _MISSING)
        missing = False

        def val(a: Any) -> Any:
            nonlocal missing
            if isinstance(a, torch.fx.Proxy):
                v = a.node.meta.get(VALUE, _MISSING)
                missing = missing or v is _MISSING
                return v
            return a

        a, kw = map_aggregate(args, val), map_aggregate(kwargs, val)
        if missing:
            return _MISSING
        try:
            self.evaluating = True
            with self.mode:
                if kind == "get_attr":
                    return operator.attrgetter(str(target))(self.root)
                if kind == "call_function":
                    return target(*a, **kw)
                if kind == "call_method":
                    return getattr(a[0], target)(*a[1:], **kw)
                if kind == "call_module":
                    return run_module(self.root.get_submodule(target), a, kw)
        except Exception as e:  # noqa: BLE001 — no value (data-dependent, unsupported on fake tensors)
            log.debug("no fake value for %s %s: %s", kind, target, e)
            if kind == "call_module":
                try:
                    return run_real(self.root.get_submodule(target), a, kw, self.mode)
                except Exception as e2:  # noqa: BLE001
                    log.debug("no value for module %s: %s", target, e2)
        finally:
            self.evaluating = False
        return _MISSING


def run_module(module: torch.nn.Module, args: Any, kwargs: Any) -> Any:
    """`module(*args, **kwargs)` on fake tensors; a recurrent layer's outputs are made from its sizes (fake
    tensors run nn.GRU step by step through its decomposition: minutes for 512 steps of 6 layers)."""
    x = args[0] if args else kwargs.get("input")
    if not isinstance(module, torch.nn.RNNBase) or getattr(module, "proj_size", 0) or \
            not isinstance(x, torch.Tensor) or x.dim() != 3:
        return module(*args, **kwargs)
    d = 2 if module.bidirectional else 1
    t, b = (x.shape[1], x.shape[0]) if module.batch_first else (x.shape[0], x.shape[1])
    out = x.new_empty((b, t, d * module.hidden_size) if module.batch_first else (t, b, d * module.hidden_size))
    h = x.new_empty((module.num_layers * d, b, module.hidden_size))
    return (out, (h, h.new_empty(h.shape))) if module.mode == "LSTM" else (out, h)


def run_real(module: torch.nn.Module, args: Any, kwargs: Any, mode: Any) -> Any:
    """A leaf's output on fake tensors, found by running it on real random tensors of the same shapes.

    For a leaf whose forward needs the data (a data-dependent branch), which fake tensors cannot run.
    Its parameters are fake, so it runs through `functional_call` with real random ones; the output's
    shape is what the rest of the graph is built for (the candidate itself calls the real leaf)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    gen = torch.Generator().manual_seed(0)  # the global RNG is the harness's, not ours to advance

    def real(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if t.is_floating_point():
            return torch.rand(tuple(t.shape), dtype=t.dtype, generator=gen)
        return torch.zeros(tuple(t.shape), dtype=t.dtype)

    with unset_fake_temporarily():
        state = {k: real(v) for k, v in [*module.named_parameters(), *module.named_buffers()]}
        with torch.no_grad():
            out = torch.func.functional_call(module, state, map_aggregate(args, real), map_aggregate(kwargs, real))
    return map_aggregate(out, lambda t: mode.from_tensor(t) if isinstance(t, torch.Tensor) else t)


class LeafShapeProp(ShapeProp):
    """fx's ShapeProp, with leaves that fake tensors cannot run (see `run_real`) run on real tensors."""

    def __init__(self, gm: torch.fx.GraphModule, mode: Any) -> None:
        super().__init__(gm)
        self.mode = mode

    def call_module(self, target: Any, args: tuple, kwargs: dict) -> Any:
        try:
            with self.mode:
                return run_module(self.fetch_attr(target), args, kwargs)
        except Exception:  # noqa: BLE001 — data-dependent on fake tensors: the real run gives its shape
            return run_real(self.fetch_attr(target), args, kwargs, self.mode)


def capture(model: torch.nn.Module, inputs: list[Any], mode: Any, max_leaves: int = 16) -> torch.fx.GraphModule:
    """`model` as a GraphModule; `inputs` are fake (made in `mode`, like the model's parameters).

    Raises the last tracing error when the root's own forward cannot be traced or more than
    `max_leaves` submodules had to become leaves."""
    import inspect

    params = inspect.signature(model.forward).parameters
    names = list(params)
    # arguments get_inputs() leaves out keep their default (`h0=None`: the `if h0 is None` branch is traced)
    concrete = {n: params[n].default for n in names[len(inputs):] if params[n].default is not inspect.Parameter.empty}
    state = _tensor_attributes(model)
    try:  # plain fx first: a module it traces gets the graph it always got
        graph = torch.fx.Tracer().trace(model, concrete_args=concrete or None)
    except Exception as e:  # noqa: BLE001
        log.info("fx cannot trace %s (%s): tracing with values", model.__class__.__name__, type(e).__name__)
        graph = _trace_with_values(model, dict(zip(names, inputs)), concrete, mode, max_leaves, state)
    finally:
        _restore(state)
    _drop_specialization_asserts(graph)
    return torch.fx.GraphModule(model, graph, model.__class__.__name__)


def _trace_with_values(model: torch.nn.Module, inputs: dict[str, Any], concrete: dict[str, Any], mode: Any,
                       max_leaves: int, state: list[tuple[torch.nn.Module, str, Any]]) -> torch.fx.Graph:
    """CaptureTracer's graph, the innermost failing submodule made a leaf after each failure."""
    leaves: set[str] = set()
    while True:
        _restore(state)
        tracer = CaptureTracer(inputs=inputs, leaves=frozenset(leaves), mode=mode)
        try:
            return tracer.trace(model, concrete_args=concrete or None)
        except Exception:
            where = tracer.failed_in
            if not where or where in leaves or len(leaves) >= max_leaves:
                raise
            log.info("%s cannot be traced: kept in PyTorch as a leaf", where)
            leaves.add(where)


def _tensor_attributes(model: torch.nn.Module) -> list[tuple[torch.nn.Module, str, Any]]:
    """Plain tensor attributes (not parameters or buffers) of every submodule, as they are before tracing."""
    return [(m, k, v) for m in model.modules() for k, v in vars(m).items() if isinstance(v, torch.Tensor)]


def _restore(state: list[tuple[torch.nn.Module, str, Any]]) -> None:
    """Undo what tracing assigned to module attributes: `self.hidden = self.tanh(...)` in forward (VanillaRNN)
    leaves a Proxy on the module, which the graph's get_attr would then read. The graph does not record the
    assignment: the candidate reads the attribute as the module's constructor left it."""
    for m, k, v in state:
        if vars(m).get(k) is not v:
            object.__setattr__(m, k, v)


def _drop_specialization_asserts(graph: torch.fx.Graph) -> None:
    """Remove fx's `_assert_is_none` on arguments left at their default (the candidate's guard runs the
    reference forward when one is given: `emit._guards`), and shape reads left without users."""
    from torch.fx._symbolic_trace import _assert_is_none

    for n in reversed(list(graph.nodes)):
        if n.op == "call_function" and (n.target is _assert_is_none or n.target is getattr) and not n.users:
            graph.erase_node(n)
