"""`--llm demo`: replies written by the project for its ReLU fixture on the CPU, so anyone can watch the loop
(a repair, a rejection, selection, the honest answer) with no API key and no network.

The script: the first kernel does not compile (the loop repairs it); the repair is a correct C++ loop; the
first mutation calls PyTorch's own ReLU (the judge rejects it: `no_custom_kernel`); later mutations and
crossovers write into an output buffer kept between calls. A prompt for any other module gets a reply that
says so and holds no code (the CLI refuses such a run up front: `supports`).
"""

from __future__ import annotations

from kevolve.agent.llm.scripted import ScriptedLLM

PROBLEM = "tests/fixtures/problems/relu.py"
_SIGNATURE = ("return torch.relu(x)", "torch.randn(64, 1024)")

_HEAD = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
'''
_LOOP = r'''
_src = r"""
#include <torch/extension.h>
torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* a = xc.data_ptr<float>();
    float* b = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;
    return y;
}
"""
_ext = load_inline(name="demo_relu_loop", cpp_sources=[_src], functions=["relu_fwd"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.relu_fwd(x)
'''
_BROKEN = _LOOP.replace("const int64_t n = xc.numel();", "const int64_t n = xc.numel()").replace(
    "demo_relu_loop", "demo_relu_first")
_TORCH_ONLY = '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)  # no kernel of its own: the judge says so
'''
_BUFFER = r'''
_src = r"""
#include <torch/extension.h>
void relu_into(torch::Tensor x, torch::Tensor y) {
    const float* __restrict__ a = x.data_ptr<float>();
    float* __restrict__ b = y.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;
}
"""
_ext = load_inline(name="demo_relu_buffer", cpp_sources=[_src], functions=["relu_into"], verbose=False,
                   extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._out = None

    def forward(self, x):
        x = x.contiguous()
        if self._out is None or self._out.shape != x.shape:
            self._out = torch.empty_like(x)
        _ext.relu_into(x, self._out)
        return self._out
'''


def _reply(words: str, source: str) -> str:
    return f"{words}\n\n```python\n{_HEAD}{source}```\n"


def supports(module_source: str) -> bool:
    """Whether the demo has replies for this module (the project's ReLU fixture)."""
    return all(s in module_source for s in _SIGNATURE)


_UNROLLED = _BUFFER.replace(
    "    for (int64_t i = 0; i < n; ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;",
    "    int64_t i = 0;\n"
    "    for (; i + 4 <= n; i += 4) {\n"
    "        b[i] = a[i] > 0.f ? a[i] : 0.f; b[i + 1] = a[i + 1] > 0.f ? a[i + 1] : 0.f;\n"
    "        b[i + 2] = a[i + 2] > 0.f ? a[i + 2] : 0.f; b[i + 3] = a[i + 3] > 0.f ? a[i + 3] : 0.f;\n"
    "    }\n"
    "    for (; i < n; ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;").replace("demo_relu_buffer", "demo_relu_unrolled")


def demo_llm() -> ScriptedLLM:
    """Each operator's replies in turn (an island's translation gets the next draft, so islands differ)."""
    rules = [
        ("Task: translate", [_reply("A C++ ReLU (this first draft has a typo the compiler will find).", _BROKEN),
                             _reply("A plain C++ loop, written into a fresh output.",
                                    _LOOP.replace("demo_relu_loop", "demo_relu_plain")),
                             _reply("A C++ loop into an output buffer kept between calls.",
                                    _BUFFER.replace("demo_relu_buffer", "demo_relu_kept"))]),
        ("Task: repair", [_reply("The missing semicolon, added.", _LOOP)]),
        ("Task: mutate", [_reply("PyTorch's own ReLU is already fast: let us try it.", _TORCH_ONLY),
                          _reply("The output buffer is kept between calls; the loop compiled with -O3.", _BUFFER),
                          _reply("The same, its loop unrolled by four.", _UNROLLED)]),
        ("Task: crossover", [_reply("The kept buffer with the unrolled loop.", _UNROLLED)]),
    ]
    return ScriptedLLM(rules, default=f"The demo has replies for {PROBLEM} on the CPU only.", name="demo")


__all__ = ["PROBLEM", "demo_llm", "supports"]
