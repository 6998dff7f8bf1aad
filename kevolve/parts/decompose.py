"""A model problem split into part problems: each a submodule the model's forward calls, as a problem of its own.

The parts are the model's submodules as its forward calls them: the root's children, with containers opened
(a `ModuleList`, and a `Sequential` holding modules of its own, as a ResNet's `layer1` of blocks; a `Sequential` of
plain layers, a stem's conv-BN-ReLU, stays one part), and a root with one child opened into that child. One forward
on the problem's inputs records each one's calls (their input shapes, and, when measured, their time on the CPU);
each becomes a KernelBench problem: its constructor call spelled from the arguments it was built with (spell.py),
the problem's definitions it needs, its inputs at the shapes it sees inside the model. Parts with the same source
(same class, arguments and input shapes: a ResNet's repeated blocks) are one part at several places. What cannot be a
part stays PyTorch, with the reason: the forward's own code between the calls (pooling, attention math), and
submodules called with keywords, with non-tensor or integer inputs, at several shapes, or whose constructor has no
spelling.
"""

from __future__ import annotations

import re
import statistics
import time
import types
from collections import defaultdict
from typing import Any

import torch
from pydantic import Field

from kevolve.contract import ProblemError, parse_python, problem_from_source
from kevolve.parts.params import parameterised
from kevolve.parts.spell import Unspellable, definitions, recording, spell
from kevolve.records import Problem, Record, content_hash

_CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)


class Part(Record):
    """One part of a model: a problem of its own, found at one or more places of the model."""

    index: int = Field(description="1-based, in the order the forward first calls it")
    paths: tuple[str, ...] = Field(description="where it is in the model (submodule paths, e.g. 'blocks.0'); "
                                   "several when identical submodules are called at the same shapes")
    spelled: str = Field(description="its constructor call, e.g. 'Block(64)'")
    inputs: tuple[str, ...] = Field(description="its inputs inside the model, e.g. 'float32[32, 64, 64, 64]'")
    calls: int = Field(description="calls per forward of the model, all places together")
    share: float | None = Field(default=None, description="its share of eager's CPU time of one forward of the "
                                "model, all places together; None when not measured")
    problem: Problem = Field(description="the part as a KernelBench problem (Model, get_inputs, get_init_inputs)")
    init: tuple[Any, ...] = Field(default=(), description="its problem's get_init_inputs(): the numbers of its "
                                  "constructor call (parts/params.py)")
    family: str = Field(default="", description="equal for parts that differ only in those numbers and their input "
                        "shapes (same definitions, same call, same input dtypes and ranks)")


class Kept(Record):
    """A submodule that stays PyTorch, and why."""

    path: str
    reason: str


class Decomposition(Record):
    """A model problem in parts."""

    problem: Problem
    parts: tuple[Part, ...] = ()
    kept: tuple[Kept, ...] = ()
    eager_ms: float | None = Field(default=None, description="one forward of the whole model on the CPU (median), "
                                   "when measured")

    @property
    def rest_share(self) -> float | None:
        """The share of eager's time outside every part (the forward's own code, modules kept), when measured."""
        shares = [p.share for p in self.parts]
        return None if not shares or None in shares else max(0.0, 1.0 - sum(shares))  # type: ignore[arg-type]


def namespace(source: str, label: str) -> dict[str, Any]:
    """The problem file executed in a fresh module; ProblemError (one line) when it raises."""
    mod = types.ModuleType(f"kevolve_parts_{abs(hash(label))}")
    try:
        exec(compile(source, label, "exec"), mod.__dict__)  # noqa: S102 — the user's own problem, as trace.py runs it
    except Exception as e:  # noqa: BLE001 — any failure is the user's file
        raise ProblemError(f"{label}: the problem file raised {type(e).__name__}: {e}") from None
    return mod.__dict__


def units(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The submodules that may become parts (see the module docstring), with their paths."""
    def walk(module: torch.nn.Module, prefix: str) -> list[tuple[str, torch.nn.Module]]:
        out = []
        for name, child in module.named_children():
            opened = isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)) or \
                isinstance(child, _CONTAINERS) and any(any(True for _ in g.children()) for g in child.children())
            out += walk(child, f"{prefix}{name}.") if opened else [(f"{prefix}{name}", child)]
        return out

    found = walk(model, "")
    while len(found) == 1 and any(True for _ in found[0][1].children()):
        found = walk(found[0][1], found[0][0] + ".")
    return found


def _signature(args: tuple, kwargs: dict) -> tuple:
    if kwargs:
        return ("keywords",)
    return tuple(("tensor", a.dtype, tuple(a.shape)) if isinstance(a, torch.Tensor) else ("other", type(a).__name__)
                 for a in args)


class _Recorder:
    """Forward hooks on the units: each call's signature, order and (CPU) time."""

    def __init__(self, found: list[tuple[str, torch.nn.Module]]) -> None:
        self.sigs: dict[str, list[tuple]] = defaultdict(list)
        self.first: dict[str, int] = {}
        self.spent: dict[str, float] = defaultdict(float)
        self._t0: dict[str, float] = {}
        self.handles = []
        for path, mod in found:
            self.handles.append(mod.register_forward_pre_hook(self._pre(path), with_kwargs=True))
            self.handles.append(mod.register_forward_hook(self._post(path)))

    def _pre(self, path: str):  # noqa: ANN202 - a hook
        def hook(mod: torch.nn.Module, args: tuple, kwargs: dict) -> None:
            self.sigs[path].append(_signature(args, kwargs))
            self.first.setdefault(path, len(self.first))
            self._t0[path] = time.perf_counter()
        return hook

    def _post(self, path: str):  # noqa: ANN202 - a hook
        def hook(mod: torch.nn.Module, args: tuple, out: Any) -> None:
            self.spent[path] += time.perf_counter() - self._t0.pop(path, time.perf_counter())
        return hook

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def _run(model: torch.nn.Module, ns: dict[str, Any], rec: _Recorder, measure: int) -> tuple[dict[str, float], float | None]:
    """Forward calls on the problem's inputs: one under fake tensors (shapes only) or, measuring, 1 + `measure` on
    the CPU. Returns each unit's median seconds per forward and the forward's median seconds (None: not measured)."""
    with torch.no_grad():
        if not measure:
            with _fake():
                model(*ns["get_inputs"]())
            return {}, None
        inputs = ns["get_inputs"]()
        model(*inputs)  # warm-up: the recorded signatures come from it
        whole, per = [], []
        for _ in range(measure):
            rec.spent.clear()
            t0 = time.perf_counter()
            model(*inputs)
            whole.append(time.perf_counter() - t0)
            per.append(dict(rec.spent))
    return {p: statistics.median(d.get(p, 0.0) for d in per) for p in rec.sigs}, statistics.median(whole)


_NO_WORK = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d, torch.nn.AlphaDropout,
            torch.nn.Identity)


def _why_not(mod: torch.nn.Module, sigs: list[tuple]) -> str | None:
    if isinstance(mod, _NO_WORK):
        return "no work in eval mode"
    if not sigs:
        return "not called by the forward"
    if sigs[0] == ("keywords",):
        return "called with keyword arguments"
    if len(set(sigs)) > 1:
        return f"called at {len(set(sigs))} different input shapes"
    if not sigs[0] or any(kind != "tensor" for kind, *_ in sigs[0]):
        return "takes a non-tensor argument" if sigs[0] else "takes no input"
    if any(not dtype.is_floating_point for _, dtype, _ in sigs[0]):
        return "takes an integer tensor"
    return None


def _shape_text(dtype: torch.dtype, shape: tuple[int, ...]) -> str:
    return f"{str(dtype).removeprefix('torch.')}[{', '.join(map(str, shape))}]"


def part_source(problem_source: str, spelled: str, sig: tuple, ns: dict[str, Any]) -> tuple[str, tuple[Any, ...], str]:
    """The part problem's file (the definitions it needs, a Model holding the part, its inputs), its constructor
    arguments (`get_init_inputs()`: the spelled call's numbers, params.py) and its family: equal for parts that differ
    only in those numbers and their input shapes (a ResNet's blocks at 64 and 128 channels)."""
    import ast

    names = {n.id for n in ast.walk(parse_python(spelled, mode="eval")) if isinstance(n, ast.Name)}
    call, params, init = parameterised(spelled, ns)
    args = [f"x{i}" for i in range(len(sig))]
    draws = [f"torch.randn({', '.join(map(str, shape))}" + ("" if dtype == torch.float32 else f", dtype={dtype}") + ")"
             for _, dtype, shape in sig]
    on = ", ".join(_shape_text(dtype, shape) for _, dtype, shape in sig)
    defs = definitions(problem_source, names)
    head = "" if re.search(r"^import torch$", defs, re.M) else "import torch\n"
    source = (f"{head}{defs}\n\n\n"
              f"class Model(torch.nn.Module):\n"
              f'    """A part of a larger model: {spelled} on {on}."""\n\n'
              f"    def __init__({', '.join(('self',) + params)}):\n        super().__init__()\n"
              f"        self.part = {call}\n\n"
              f"    def forward(self, {', '.join(args)}):\n        return self.part({', '.join(args)})\n\n\n"
              f"def get_inputs():\n    return [{', '.join(draws)}]\n\n\n"
              f"def get_init_inputs():\n    return [{', '.join(map(repr, init))}]\n")
    family = content_hash("\n".join([defs, call, *(f"{dtype}/{len(shape)}" for _, dtype, shape in sig)]))
    return source, init, family


def _fake() -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


def _build(make: Any, fake: bool) -> torch.nn.Module:
    """`make()`, with fake parameters when `fake` (shapes are all that is needed: a 4 GB Linear costs nothing) unless
    the constructor needs values (`.item()`), then real ones."""
    if fake:
        try:
            with _fake():
                return make()
        except Exception:  # noqa: BLE001 — a constructor that needs values: real parameters
            pass
    return make()


def _check(source: str, label: str, module: torch.nn.Module) -> str | None:
    """None when the part's source builds a module with the original's parameter and buffer shapes; else why not."""
    try:
        ns = namespace(source, label)
        built = _build(lambda: ns["Model"](*ns["get_init_inputs"]()).part, fake=True)
    except Exception as e:  # noqa: BLE001 — a wrong spelling is a part that stays PyTorch
        return f"its spelled constructor fails ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})"
    same = [tuple(t.shape) for t in module.parameters()] == [tuple(t.shape) for t in built.parameters()] and \
        [tuple(t.shape) for t in module.buffers()] == [tuple(t.shape) for t in built.buffers()]
    return None if same else "its spelled constructor builds other parameters (a module copied, or changed after "\
        "it was made)"


def decompose(problem: Problem, measure: int = 0) -> Decomposition:
    """`problem`'s model in parts; with `measure` > 0, each part's share of eager's CPU time over that many forward
    calls (after one warm-up). Raises ProblemError (one line) when the problem itself cannot be built or run."""
    ns = namespace(problem.source, problem.path)
    try:
        init = ns["get_init_inputs"]()
        with recording() as made:
            model = _build(lambda: ns["Model"](*init), fake=not measure).eval()
    except Exception as e:  # noqa: BLE001
        raise ProblemError(f"{problem.name}: Model(*get_init_inputs()) raised {type(e).__name__}: {e}") from None
    found = units(model)
    rec = _Recorder(found)
    try:
        spent, whole = _run(model, ns, rec, measure)
    except Exception as e:  # noqa: BLE001
        raise ProblemError(f"{problem.name}: its forward raised {type(e).__name__}: {str(e)[:200]}") from None
    finally:
        rec.close()
    kept, by_source = [], {}
    for path, mod in sorted(found, key=lambda pm: rec.first.get(pm[0], len(found))):
        sigs = rec.sigs.get(path, [])
        why = _why_not(mod, sigs)
        if why is None:
            try:
                spelled = spell(mod, made, ns)
            except Unspellable as e:
                why = f"no constructor spelling: {e}"
        if why is None:
            source, init, family = part_source(problem.source, spelled, sigs[0], ns)
            if source not in by_source and (why := _check(source, f"{problem.name}:{path}", mod)) is None:
                by_source[source] = {"paths": [], "spelled": spelled, "sig": sigs[0], "calls": 0, "spent": 0.0,
                                     "init": init, "family": family}
        if why is not None:
            kept.append(Kept(path=path, reason=why))
            continue
        entry = by_source[source]
        entry["paths"].append(path)
        entry["calls"] += len(sigs) // (1 + measure)  # the warm-up and the measured calls each called it
        entry["spent"] += spent.get(path, 0.0)
    parts = []
    for i, (source, e) in enumerate(by_source.items(), 1):
        sub = problem_from_source(source, path=f"{problem.path}#part{i}", name=f"{problem.name}_part{i}",
                                  level=problem.level)
        parts.append(Part(index=i, paths=tuple(e["paths"]), spelled=e["spelled"], calls=e["calls"], init=e["init"],
                          family=e["family"],
                          inputs=tuple(_shape_text(d, s) for _, d, s in e["sig"]),
                          share=e["spent"] / whole if whole else None, problem=sub))
    return Decomposition(problem=problem, parts=tuple(parts), kept=tuple(kept),
                         eager_ms=None if whole is None else 1e3 * whole)
