"""Recurrent layers (`nn.LSTM`, `nn.GRU`, `nn.RNN`) as library GEMMs around one fused gate kernel per step.

Per layer and direction: the input projection of every timestep is one GEMM (`addmm`, biases folded in
where they add), each step's recurrent product is one GEMM (`addmm` onto that step's projection), and
one generated kernel then does the cell's element-wise work in a single pass: the gate activations, the
state update (c and h for LSTM, h for GRU / RNN), and the write of h into the layer's output sequence.
The launcher returns what the module returns (`out, (h_n, c_n)` or `out, h_n`), so the graph's getitem
nodes stay as they were.

The launcher is Python text written once (`launcher`); the CPU twin runs that same text with the kernel
swapped for its torch twin (`_gate_twin`), so the loop, the weight order, the directions and the layouts
the candidate uses are what the CPU check compares with the module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from kevolve.offline.graph.ir import Group
from kevolve.offline.graph.meta import node_dtype, node_shape
from kevolve.offline.graph.partition import Fused
from kevolve.offline.kernels_direct.direct import DirectKind, make_group, param

from kevolve.kernel_params import KernelParams

GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


@dataclass(frozen=True)
class RnnSpec:
    """One recurrent module at fixed sizes."""

    mode: str
    """'LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU' (torch's own names)"""
    layers: int
    directions: int
    seq: int
    batch: int
    hidden: int
    batch_first: bool
    bias: bool
    given: int
    """initial states among the leaves: 0 (zeros), 1 (h0) or 2 (h0, c0)"""

    @property
    def width(self) -> int:
        """Columns of one step's projected gates."""
        return GATES[self.mode] * self.hidden


def _find(node: torch.fx.Node, gm: torch.fx.GraphModule) -> Fused | None:
    if node.op != "call_module":
        return None
    mod = gm.get_submodule(str(node.target))
    if not isinstance(mod, torch.nn.RNNBase) or getattr(mod, "proj_size", 0) or mod.mode not in GATES:
        return None
    x = node.args[0] if node.args else node.kwargs.get("input")
    hx = node.args[1] if len(node.args) > 1 else node.kwargs.get("hx")
    states = list(hx) if isinstance(hx, (tuple, list)) else ([] if hx is None else [hx])
    shape = node_shape(x) if isinstance(x, torch.fx.Node) else None
    if shape is None or len(shape) != 3 or node_dtype(x) != torch.float32 or \
            not all(isinstance(s, torch.fx.Node) for s in states) or len(states) not in (0, 2 if mod.mode == "LSTM" else 1):
        return None  # unbatched input, packed sequences, other dtypes: the module stays
    seq, batch = (shape[1], shape[0]) if mod.batch_first else (shape[0], shape[1])
    dirs = 2 if mod.bidirectional else 1
    spec = RnnSpec(mod.mode, mod.num_layers, dirs, seq, batch, mod.hidden_size, mod.batch_first, mod.bias,
                   len(states))
    refs: list[Any] = [x, *states]
    for layer in range(mod.num_layers):
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if mod.bias else [])
            refs += [param(gm, node, n + sfx) for n in names]
    out_shape = (shape[0], shape[1], dirs * mod.hidden_size)
    return make_group("rnn", spec, [node], refs, out_shape)


_CELL = {
    "LSTM": """    float* __restrict__ c = (float*)a1;
    const float* gi = g + b * {w}u;
    const float ig = 1.f / (1.f + expf(-gi[j])), fg = 1.f / (1.f + expf(-gi[{h}u + j]));
    const float gg = tanhf(gi[{h2}u + j]), og = 1.f / (1.f + expf(-gi[{h3}u + j]));
    const float cn = fg * c[i] + ig * gg;
    const float hn = og * tanhf(cn);
    c[i] = cn;""",
    "GRU": """    const float* __restrict__ hg = a1 + b * {w}u;
    const float* xg = g + b * {w}u;
    const float r = 1.f / (1.f + expf(-(xg[j] + hg[j])));
    const float z = 1.f / (1.f + expf(-(xg[{h}u + j] + hg[{h}u + j])));
    const float n = tanhf(xg[{h2}u + j] + r * hg[{h2}u + j]);
    const float hn = (1.f - z) * n + z * h[i];""",
    "RNN_TANH": "    const float hn = tanhf(g[b * {w}u + j]);",
    "RNN_RELU": "    const float hn = fmaxf(g[b * {w}u + j], 0.f);",
}


def kernel(name: str, g: Group, p: KernelParams) -> str:
    """The cell's element-wise step: (gates, c or hg or unused, h, y_t) -> h (and c) updated in place and h
    written into the output row `y_t` (its rows `directions x hidden` apart)."""
    s: RnnSpec = g.spec  # type: ignore[assignment]
    h = s.hidden
    body = _CELL[s.mode].format(w=s.width, h=h, h2=2 * h, h3=3 * h)
    return f"""extern "C" __global__ void __launch_bounds__({p.block}) {name}(const float* __restrict__ g,
    const float* a1, float* __restrict__ h, float* __restrict__ y) {{
  for (unsigned int i = blockIdx.x * {p.block}u + threadIdx.x; i < {s.batch * h}u; i += gridDim.x * {p.block}u) {{
    const unsigned int b = i / {h}u, j = i % {h}u;
{body}
    h[i] = hn;
    y[b * {s.directions * h}u + j] = hn;
  }}
}}
"""


def blocks(g: Group, p: KernelParams) -> int:
    s: RnnSpec = g.spec  # type: ignore[assignment]
    return -(-(s.batch * s.hidden) // p.block)


def launcher(fz: Fused, k: int, name: str, p: KernelParams) -> str:
    """The Python launcher (see the module docstring): one input GEMM per layer and direction, then per step
    one recurrent GEMM and one gate kernel launch."""
    s: RnnSpec = fz.group.spec  # type: ignore[assignment]
    per = 4 if s.bias else 2
    states = ["h0", "c0"][:s.given]
    lstm, gru = s.mode == "LSTM", s.mode == "GRU"
    zeros = "torch.zeros((B, H), device=x.device, dtype=torch.float32)"
    h_init = "h0[ld].clone(memory_format=torch.contiguous_format)" if s.given else zeros
    c_init = ("c0[ld].clone(memory_format=torch.contiguous_format)" if s.given == 2 else zeros) if lstm else "None"
    in_bias = ("w[i + 2]" if gru else "w[i + 2] + w[i + 3]") if s.bias else None
    xg = (f"torch.addmm({in_bias}, seq.reshape(T * B, -1), w[i].t())" if in_bias
          else "torch.mm(seq.reshape(T * B, -1), w[i].t())")
    if gru:
        step = [("            hg = torch.addmm(w[i + 3], h, w[i + 1].t())" if s.bias
                 else "            hg = torch.mm(h, w[i + 1].t())"),
                f"            _kv_launch({name!r}, grid, {p.block}, (xg[t], hg, h, y[t, :, d * H:]))"]
    else:
        step = ["            gates = torch.addmm(xg[t], h, w[i + 1].t())",
                f"            _kv_launch({name!r}, grid, {p.block}, (gates, {'c' if lstm else 'h'}, h, y[t, :, d * H:]))"]
    hn = "(torch.stack(hs), torch.stack(cs))" if lstm else "torch.stack(hs)"
    lines = [
        f"def _kv_launch_{k}(x, {', '.join([*states, '*w'])}):",
        f'    """{fz.group.describe()}"""',
        f"    T, B, H, D = {s.seq}, {s.batch}, {s.hidden}, {s.directions}",
        f"    seq = x.transpose(0, 1).contiguous() if {s.batch_first} else x.contiguous()",
        f"    grid = max(1, min({blocks(fz.group, p)}, _kv_sms(x.device) * {p.waves}))",
        "    hs, cs = [], []",
        f"    for layer in range({s.layers}):",
        "        y = torch.empty((T, B, D * H), device=x.device, dtype=torch.float32)",
        "        for d in range(D):",
        f"            ld, i = layer * D + d, (layer * D + d) * {per}",
        f"            xg = {xg}.view(T, B, {s.width})",
        f"            h, c = {h_init}, {c_init}",
        "            for t in (range(T) if d == 0 else range(T - 1, -1, -1)):",
        *["    " + ln for ln in step],
        "            hs.append(h)",
        "            cs.append(c)",
        "        seq = y",
        f"    out = seq.transpose(0, 1).contiguous() if {s.batch_first} else seq",
        f"    return out, {hn}",
    ]
    return "\n".join(lines) + "\n"


def _gate_twin(mode: str, hidden: int) -> Any:
    """`_kv_launch` for the CPU: the gate kernel's computation with torch, on the same tensors, in place."""
    def launch(name: str, grid: int, block: int, tensors: tuple[torch.Tensor, ...]) -> None:
        g, a1, h, y = tensors
        if mode == "LSTM":
            i, f, gg, o = g.split(hidden, dim=1)
            a1.copy_(torch.sigmoid(f) * a1 + torch.sigmoid(i) * torch.tanh(gg))
            h.copy_(torch.sigmoid(o) * torch.tanh(a1))
        elif mode == "GRU":
            xr, xz, xn = g.split(hidden, dim=1)
            hr, hz, hn = a1.split(hidden, dim=1)
            r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
            h.copy_((1 - z) * torch.tanh(xn + r * hn) + z * h)
        else:
            h.copy_(torch.tanh(g) if mode == "RNN_TANH" else torch.relu(g))
        y[:, :hidden].copy_(h)
    return launch


def twin(g: Group, leaves: list[torch.Tensor]) -> Any:
    """The generated launcher run on the CPU with the gate kernel's torch twin."""
    s: RnnSpec = g.spec  # type: ignore[assignment]
    fz = Fused(group=g, nodes=[], extra=[], leaf_refs=[])
    p = KernelParams(block=256, vec=1, ilp=1, waves=8, unroll=1)
    ns: dict[str, Any] = {"torch": torch, "_kv_launch": _gate_twin(s.mode, s.hidden), "_kv_sms": lambda dev: 1}
    exec(launcher(fz, 0, "kv_rnn", p), ns)  # noqa: S102 — our own generated text, the candidate's launcher
    return ns["_kv_launch_0"](*[t.float() for t in leaves])


KIND = DirectKind(find=_find, kernel=kernel, blocks=blocks, twin=twin, launcher=launcher)
