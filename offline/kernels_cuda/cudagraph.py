"""CUDA-graph capture of a candidate's whole forward: one more plan setting the search can pick
(`KernelParams.graph` of the first group), never a default.

The evaluator times device time (a GPU sleep pad hides host launch overhead), so a graph gains only
the gaps between a forward's kernels, and pays a copy of each input into the graph's static buffers
and a clone of each output. It can win where a forward launches several short kernels.

Correctness rules of the generated code:
- static input buffers, captured once per *key*: every input's shape, strides, dtype and device, the
  value of every non-tensor argument, and the address and layout of every parameter and buffer (a
  moved or replaced weight is recaptured, not read from its old address);
- each call copies its inputs in, replays, and returns clones: an output never aliases the graph's
  memory, which the next replay overwrites;
- the first call of a key runs the forward once uncaptured (kernels compile, lazy state settles), then
  captures it on PyTorch's capture stream; CuPy and Triton launches follow PyTorch's current stream.
"""

from __future__ import annotations

RUNTIME = '''
def _kv_layout(t):
    """What a captured graph depends on for one argument (a tensor's layout, a number's value)."""
    if isinstance(t, torch.Tensor):
        return (tuple(t.shape), t.stride(), t.dtype, str(t.device))
    return ("value", type(t).__name__, repr(t))


def _kv_graph_key(model, args):
    """Inputs by layout (they are copied into static buffers); weights by address too (read in place)."""
    held = tuple((t.data_ptr(), _kv_layout(t)) for t in (*model.parameters(), *model.buffers()))
    return tuple(_kv_layout(a) for a in args), held


def _kv_clone(out):
    """The outputs as fresh tensors (the graph's own output memory is overwritten by the next replay)."""
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_kv_clone(o) for o in out)
    return out
'''


REPLAY = '''
    def _kv_replay(self, args):
        """`_kv_body(*args)` replayed from a CUDA graph captured for these argument layouts."""
        key = _kv_graph_key(self, args)
        state = getattr(self, "_kv_graph", None)
        if state is None or state[0] != key:
            self._kv_graph = None  # the old graph's memory goes before a new capture takes more
            static = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
            self._kv_body(*static)  # warm-up outside the capture: NVRTC / Triton compilation, lazy state
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = self._kv_body(*static)
            state = (key, graph, static, out)
            self._kv_graph = state
        _, graph, static, out = state
        for s, a in zip(static, args):
            if isinstance(s, torch.Tensor):
                s.copy_(a)
        graph.replay()
        return _kv_clone(out)
'''


def wrap_forward(header: str, guards: list[str], body: list[str], call: str) -> list[str]:
    """Class lines: a `forward` that keeps the guards and replays `_kv_body` (the traced forward) from a graph.

    `header` is the traced forward's `def forward(self, …):` line, `call` its arguments as a call
    expression (`x, y` or `*args`)."""
    body_header = header.replace("def forward(", "def _kv_body(", 1)
    return ["    " + header, *("    " + g for g in guards), f"        return self._kv_replay(({call},))",
            *REPLAY.rstrip("\n").splitlines(), "", "    " + body_header, *("    " + ln for ln in body)]
