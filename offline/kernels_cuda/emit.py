"""Write a candidate source: the problem's Model, the kernels, one launcher per group, and a
`ModelNew(Model)` whose forward is the traced graph with each group replaced by its launcher.

ModelNew subclasses the reference so it creates the same parameters in the same order (identical
initial weights under the harness's seed); library calls (matmul, convolution, pooling …) stay the
torch calls of the traced graph. Kernels compile lazily with CuPy/NVRTC on first use and run on
PyTorch's current stream.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
import re
from typing import Any

import torch
import torch.fx
from kevolve.kernel_params import KernelParams
from kevolve.offline.graph.canon import ParamRef
from kevolve.offline.kernels_cuda.cuda import PRELUDE, pointwise_kernel
from kevolve.offline.kernels_cuda.cuda_launch import aligned_all, has_scalar_twin, leaf_prologue, out_line, vector_choice
from kevolve.offline.kernels_cuda.cuda_row import row_grid, row_kernel
from kevolve.offline.graph.partition import Fused
from kevolve.offline.space import describe_all
from kevolve.offline.graph.trace import Traced, TraceError
from kevolve.contract import parse_python

_RUNTIME = '''
_KV_MOD = None
_KV_FN = {}
_KV_SMS = {}
_KV_STREAMS = {}


def _kv_fn(name):
    """The compiled kernel `name` (the module is compiled with NVRTC on first use)."""
    global _KV_MOD
    if _KV_MOD is None:
        _KV_MOD = cp.RawModule(code=_KV_SRC, options=("-std=c++17",))
    if name not in _KV_FN:
        _KV_FN[name] = _KV_MOD.get_function(name)
    return _KV_FN[name]


def _kv_sms(device):
    if device not in _KV_SMS:
        _KV_SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _KV_SMS[device]


def _kv_stream():
    """CuPy's handle on PyTorch's current stream, made once per stream (making one costs ~20 us)."""
    cur = torch.cuda.current_stream()
    h = cur.cuda_stream
    s = _KV_STREAMS.get(h)
    if s is None:
        try:
            s = cp.cuda.Stream.from_external(cur)  # CuPy 14: the CUDA stream protocol (ExternalStream is deprecated)
        except (AttributeError, TypeError):  # CuPy 13, or a torch stream without the protocol
            s = cp.cuda.ExternalStream(h)
        _KV_STREAMS[h] = s
    return s


def _kv_args(tensors):
    """Kernel arguments: each tensor's device address as the 64-bit value a pointer parameter takes
    (a CuPy array made from a tensor costs ~15 us of host time, more than a small kernel runs)."""
    return tuple(cp.uint64(t.data_ptr()) for t in tensors)


def _kv_launch(name, grid, block, tensors):
    with _kv_stream():
        _kv_fn(name)((grid,), (block,), _kv_args(tensors))
'''


def kernel_source(fz: Fused, name: str, p: KernelParams) -> list[str]:
    """CUDA text of a group's kernel(s): a vectorized pointwise or row kernel also gets a scalar twin."""
    from dataclasses import replace

    g = fz.group
    if g.kind == "gemm":
        from kevolve.offline.kernels_direct.gemm import gemm_kernel

        return [gemm_kernel(name, g.gemm, p)]  # type: ignore[arg-type]
    if g.kind != "fused":
        from kevolve.offline.kernels_direct.kinds import registry

        return [registry()[g.kind].kernel(name, g, p)]
    if g.is_pointwise:
        out = [pointwise_kernel(name, g, p)]
        if p.vec > 1:
            out.append(pointwise_kernel(name + "_v1", g, replace(p, vec=1)))
        return out
    if p.strategy == "split":
        from kevolve.offline.kernels_cuda.cuda_split import split_kernels as make
    else:
        make = lambda n, g, p, vec=None: [row_kernel(n, g, p, vec)]  # noqa: E731
    # The twin is the same kernel with scalar accesses, not the kernel of `replace(p, vec=1)`: the
    # launcher sizes the grid and the split partials from `p` for whichever of the two it runs.
    twin = make(name + "_v1", g, p, 1) if has_scalar_twin(g, p) else []
    return make(name, g, p) + twin


def launcher_source(fz: Fused, k: int, name: str, p: KernelParams) -> str:
    """Python launcher of group `k`: contiguous inputs, output allocation, grid, launch."""
    g = fz.group
    if g.kind == "mm":
        from kevolve.offline.kernels_triton import triton_mm

        return triton_mm.launcher_source(fz, k, name, p)
    if g.kind == "tconv":
        from kevolve.offline.kernels_triton import triton_conv

        return triton_conv.launcher_source(fz, k, name, p)
    if g.kind == "gemm":
        from kevolve.offline.kernels_direct.gemm import gemm_launcher

        return gemm_launcher(fz, k, name, p)
    if g.kind != "fused":
        from kevolve.offline.kernels_direct.kinds import direct_launcher

        return direct_launcher(fz, k, name, p)
    if p.strategy == "split" and not g.is_pointwise:
        from kevolve.offline.kernels_cuda.cuda_split import split_launcher

        return split_launcher(g, k, name, p)
    args = [f"a{i}" for i in range(len(g.leaves))]
    lines = [f"def _kv_launch_{k}({', '.join(args)}):", f'    """{g.describe()}"""', *leaf_prologue(g)]
    lines.append(out_line(g))
    if g.is_pointwise:
        need = -(-g.numel // (p.vec * p.block * p.ilp))
        lines.append(f"    grid = max(1, min({need}, _kv_sms(dev) * {p.waves}))")
        if p.vec > 1:
            lines += [f"    if not {aligned_all(g, [*args, 'out'], p.vec)}:",
                      f"        grid1 = max(1, min({-(-g.numel // (p.block * p.ilp))}, _kv_sms(dev) * {p.waves}))",
                      f"        _kv_launch({name + '_v1'!r}, grid1, {p.block}, ({', '.join(args)}, out))",
                      "        return out"]
        lines += [f"    _kv_launch({name!r}, grid, {p.block}, ({', '.join(args)}, out))", "    return out"]
    else:
        lines += [f"    grid = max(1, min({row_grid(g, p)}, _kv_sms(dev) * {p.waves}))",
                  vector_choice(g, name, p, [*args, "out"]),
                  f"    _kv_launch(kn, grid, {p.block}, ({', '.join(args)}, out))", "    return out"]
    return "\n".join(lines) + "\n"


def _strip_problem(source: str) -> str:
    """The problem source without get_inputs / get_init_inputs (the candidate needs only Model)."""
    tree = parse_python(source)
    drop = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("get_inputs", "get_init_inputs")]
    lines = source.splitlines()
    for n in sorted(drop, key=lambda n: n.lineno, reverse=True):
        start = min([n.lineno, *(d.lineno for d in n.decorator_list)]) - 1
        del lines[start:n.end_lineno]
    return "\n".join(lines).rstrip() + "\n"


def _launcher_fn(k: int) -> Any:
    def fn(*args: Any) -> Any:
        raise RuntimeError("placeholder")
    fn.__name__ = fn.__qualname__ = f"_kv_launch_{k}"
    fn.__module__ = "kevolve_generated"
    fn.kv_group = k  # type: ignore[attr-defined]
    return fn


def rewrite(traced: Traced, fused: list[Fused]) -> torch.fx.Graph:
    """A copy of the traced graph with each group replaced by a call to its launcher (`_kv_launch_K`,
    whose `kv_group` attribute is the group's index)."""
    gm = traced.gm
    graph = torch.fx.Graph()
    vmap: dict[torch.fx.Node, torch.fx.Node] = {}
    out = graph.graph_copy(gm.graph, vmap)
    graph.output(out)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for k, fz in enumerate(fused):
        sink = vmap[fz.sink]
        with graph.inserting_before(sink):
            args = [vmap[r] if isinstance(r, torch.fx.Node) else graph.get_attr(r.path) for r in fz.leaf_refs]
            fn = _launcher_fn(k)
            call = graph.call_function(fn, tuple(args))
        sink.replace_all_uses_with(call)
        for n in sorted([*fz.nodes, *fz.extra], key=order.__getitem__, reverse=True):
            graph.erase_node(vmap[n])
        vmap[fz.sink] = call  # later groups read this group's output
    graph.lint()
    return graph


def forward_source(traced: Traced, fused: list[Fused]) -> tuple[str, dict[str, Any]]:
    """The rewritten forward's Python (a `def forward(self, …)`), and its globals by name."""
    code = rewrite(traced, fused).python_code(root_module="self")
    # fx prefixes `torch.fx._symbolic_trace.wrap("f")` for each autowrapped library function (capture.py's
    # einops calls): a tracing directive, not part of the forward
    src = re.sub(r"^\s*torch\.fx\._symbolic_trace\.wrap\([^)]*\)\n", "", code.src, flags=re.MULTILINE)
    src = re.sub(r"\btorch\._C\._nn\.(\w+)\b", _public_nn, src)
    used = set(re.findall(r"[A-Za-z_]\w*", src))
    return src, {name: obj for name, obj in code.globals.items() if name in used}


def _public_nn(m: re.Match[str]) -> str:
    """`torch._C._nn.linear` (how fx writes F.linear, F.gelu … captured by dynamo) as its public name,
    `torch.nn.functional.linear`: the same function, and what the candidate policy lets a candidate call."""
    name = m.group(1)
    public = getattr(torch.nn.functional, name, None)
    return f"torch.nn.functional.{name}" if public is not None and public is getattr(torch._C._nn, name, None) else m.group(0)


def _public_module(module: str, head: str) -> str:
    """The shortest already-imported package prefix of `module` that holds the same `head`: `einops` for
    `einops.einops.rearrange` (what the problem itself imports, and what the candidate policy allows), else
    `module` itself."""
    import sys

    held = getattr(sys.modules.get(module), head, None)
    parts = module.split(".")
    for i in range(1, len(parts)):
        prefix = ".".join(parts[:i])
        if held is not None and getattr(sys.modules.get(prefix), head, None) is held:
            return prefix
    return module


def _globals_block(glb: dict[str, Any], launchers: dict[str, str]) -> list[str]:
    lines = []
    for name, obj in glb.items():
        if getattr(obj, "__module__", None) == "kevolve_generated":
            lines.append(f"{name} = {obj.__name__}")
        elif name == "torch" or (name in vars(builtins) and getattr(builtins, name) is obj):
            continue
        elif isinstance(obj, str) and re.fullmatch(r"[\w.]+", obj):  # a type annotation, e.g. 'torch.Tensor'
            lines.append(f"{name} = {obj}")
        elif isinstance(obj, float):
            lines.append(f"{name} = float({str(obj)!r})")
        elif isinstance(obj, type(math)):
            lines.append(f"import {obj.__name__} as {name}")
        elif getattr(obj, "__module__", None) and "<" not in getattr(obj, "__qualname__", "<"):
            # a plain import (not __import__): candidates must pass the candidate policy
            head, _, rest = obj.__qualname__.partition(".")
            owner = name if not rest else f"_kv_{name}_owner"
            lines.append(f"from {_public_module(obj.__module__, head)} import {head} as {owner}")
            if rest:
                lines.append(f"{name} = {owner}.{rest}")
        else:
            raise TraceError(f"trace_failed: the traced forward needs {name!r} ({type(obj).__name__}), "
                             "which cannot be written into a candidate")
    return lines


def _kernel_name(fz: Fused, k: int) -> str:
    return f"kv_{fz.group.kind}_{k}" if fz.group.kind in TRITON_KINDS else f"kv_fused_{k}"


TRITON_KINDS = ("mm", "tconv")
"""group kinds whose kernels are Triton's (the rest are CUDA text compiled by NVRTC through CuPy)"""


def _kernel_parts(fused: list[Fused], names: list[str], params: list[KernelParams]) -> list[str]:
    """Module-level parts holding the kernels: CuPy's CUDA text and runtime, then Triton kernels."""
    from kevolve.offline.kernels_triton import triton_conv, triton_mm

    cuda = [s for fz, n, p in zip(fused, names, params, strict=True) if fz.group.kind not in TRITON_KINDS
            for s in kernel_source(fz, n, p)]
    tri = [(triton_mm if fz.group.kind == "mm" else triton_conv).kernel_source(n, fz.group, p)
           for fz, n, p in zip(fused, names, params, strict=True) if fz.group.kind in TRITON_KINDS]
    parts = ["_KV_SRC = r'''" + "\n".join([PRELUDE, *cuda]) + "'''", _RUNTIME] if cuda else []
    return parts + tri


def render(problem_source: str, traced: Traced, fused: list[Fused], params: list[KernelParams],
           technique: str = "cuda") -> str:
    """The whole candidate source."""
    names = [_kernel_name(fz, k) for k, fz in enumerate(fused)]
    launchers = [launcher_source(fz, k, n, p) for k, (fz, n, p) in enumerate(zip(fused, names, params, strict=True))]
    fwd, glb = forward_source(traced, fused)
    fwd_lines = [ln for ln in fwd.strip("\n").splitlines()]
    header, body = fwd_lines[0], fwd_lines[1:]
    guards, call = _guards(traced, fused, header)
    doc = '    """The traced forward with fused CUDA kernels in place of element-wise and row ops."""'
    graph = bool(params) and params[0].graph
    if graph:
        from kevolve.offline.kernels_cuda import cudagraph

        methods = cudagraph.wrap_forward(header, guards, body, call)
    else:
        methods = ["    " + header, *("    " + g for g in guards), *("    " + ln for ln in body)]
    cls = ["class ModelNew(Model):", doc, "", *_constants_init(traced), *methods]
    desc = "; ".join(fz.group.describe() for fz in fused)
    uses_cuda = any(fz.group.kind not in TRITON_KINDS for fz in fused)
    uses_triton = any(fz.group.kind in TRITON_KINDS for fz in fused)
    imports = (["import cupy as cp"] if uses_cuda else []) + ["import torch"] + (
        ["import triton\nimport triton.language as tl"] if uses_triton else [])
    parts = [f'"""kevolve offline candidate: {len(fused)} fused kernel(s) ({desc})."""',
             _settings_line(params, fused, technique), *imports, _strip_problem(problem_source),
             *_kernel_parts(fused, names, params), *launchers, _graph_runtime(graph),
             "\n".join(_globals_block(glb, {})), "\n".join(cls)]
    return "\n\n".join(p for p in parts if p) + "\n"


def _settings_line(params: list[KernelParams], fused: list[Fused], technique: str) -> str:
    """A comment for the reader of the source (or of its archive entry); the loop never reads it back: the
    candidate's record carries the choice (Candidate.offline)."""
    return f"# offline parameters ({technique}): {describe_all(params, [fz.group for fz in fused])}"


def traced_constants(traced: Traced) -> dict[str, torch.Tensor]:
    """Tensors that tracing created (`torch.tensor(0.5)` in forward becomes `self._tensor_constant0`,
    set on the traced module only), which a freshly built reference module does not have."""
    return {str(n.target): operator.attrgetter(str(n.target))(traced.gm) for n in traced.gm.graph.nodes
            if n.op == "get_attr" and re.fullmatch(r"_tensor_constant\d+", str(n.target))}


def _constants_init(traced: Traced) -> list[str]:
    """An __init__ registering the traced constants as non-persistent buffers (they follow .cuda())."""
    consts = traced_constants(traced)
    if not consts:
        return []
    lines = ["    def __init__(self, *args, **kwargs):", "        super().__init__(*args, **kwargs)"]
    for name, t in consts.items():
        if not isinstance(t, torch.Tensor) or t.numel() > 4096 or "." in name or \
                type(t).__name__ == "FakeTensor":
            raise TraceError(f"trace_failed: the traced forward needs the constant {name!r}, which cannot be "
                             "written into a candidate")
        lines.append(f"        self.register_buffer({name!r}, torch.tensor({t.tolist()!r}, dtype={t.dtype}), "
                     "persistent=False)")
    return [*lines, ""]


def _graph_runtime(graph: bool) -> str:
    if not graph:
        return ""
    from kevolve.offline.kernels_cuda.cudagraph import RUNTIME

    return RUNTIME.strip("\n")


def _guards(traced: Traced, fused: list[Fused], header: str) -> tuple[list[str], str]:
    """Fall back to the reference forward for shapes or modes the kernels were not generated for; the
    guard lines and the forward's arguments as a call expression."""
    params = [n for n in traced.gm.graph.nodes if n.op == "placeholder"]
    if len(params) == 1 and str(params[0].target).startswith("*"):  # forward(self, *args): read the tuple
        var = str(params[0].target).lstrip("*")
        names, call = [f"{var}[{i}]" for i in range(len(traced.input_shapes))], f"*{var}"
        conds = ["self.training", f"len({var}) != {len(traced.input_shapes)}"]
    else:
        # the parameters' own names (`target`), as the forward's signature has them: a node's `name` is
        # fx's (KernelBench's `forward(self, A, B)` gives nodes a, b; the guard read them unbound)
        names = [str(n.target) for n in params]
        call = ", ".join(names)
        conds = ["self.training"]  # traced in eval mode, as the evaluator runs it
    # an argument get_inputs() leaves out was traced at its default (None): given, it runs the reference
    conds += [f"{name} is not None" for name in names[len(traced.input_shapes):]]
    for name, shape in zip(names, traced.input_shapes):
        if shape is not None:
            conds.append(f"tuple({name}.shape) != {tuple(shape)!r}")
            conds.append(f"not {name}.is_cuda")
    return [f"    if {' or '.join(conds)}:", f"        return super().forward({call})"], call


_ = ParamRef  # leaves that are module parameters are read through get_attr nodes
