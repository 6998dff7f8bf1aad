"""Offline row kernels run on the CPU: the generated CUDA compiled by g++ against a fiber shim
(tests/cuda_cpu.py) and launched by the candidate's own launcher, against the module's output.

These caught what the NVRTC compile and the IR interpreter cannot: a split scalar twin cut into other
chunks than the grid and partials its launcher allocates (NaN or stale statistics, writes past the
partials), and a one-pass Welford walk whose running mean stalls on long per-thread walks in fp32.
No GPU, so no races between blocks, no CUDA libm: tests/gpu/test_offline_gpu.py stays the judge."""

from __future__ import annotations

import re
from dataclasses import replace

import cuda_cpu
import pytest
import torch

from kevolve.offline.kernels_cuda.cuda_split import chunks
from kevolve.offline.generate import plan
from kevolve.contract import problem_from_source

pytestmark = pytest.mark.skipif(not cuda_cpu.available(), reason="needs g++ on x86-64 Linux")




def _layernorm(shape: tuple[int, ...], rows: int):
    src = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
           f"        super().__init__()\n        self.ln = nn.LayerNorm({shape!r})\n\n    def forward(self, x):\n"
           f"        return self.ln(x)\n\n\ndef get_inputs():\n    return [torch.randn({rows}, *{shape!r})]\n\n\n"
           "def get_init_inputs():\n    return []\n")
    return plan(problem_from_source(src, name="layernorm_rows"))


def _misaligned(x: torch.Tensor) -> torch.Tensor:
    """`x`'s values in a contiguous view 4 bytes into its storage (the launcher must take the scalar twin)."""
    base = torch.empty(x.numel() + 1)
    out = base[1:].view(x.shape)
    out.copy_(x)
    assert out.data_ptr() % 16 == 4
    return out


def _run(p, params, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """(kernels' output, float64 module's output, kernels launched) for input `x`."""
    ns = cuda_cpu.load(p.source(params))
    torch.manual_seed(0)
    model = ns["Model"]().eval()
    with torch.no_grad():
        model.ln.weight.normal_(1.0, 0.5)
        model.ln.bias.normal_(0.0, 0.5)
        got = ns["_kv_launch_0"](x, model.ln.weight, model.ln.bias)
        want = model.double()(x.double()).float()
    return got, want, [name for name, _, _ in ns["_KV_LAUNCHES"]]


@pytest.mark.parametrize("onepass", [True, False])
def test_misaligned_split_rows_run_a_twin_cut_like_its_vector_kernel(onepass):
    """Rows of 4096 split over 512-thread blocks are 2 chunks read as float4 but were 8 read as scalars:
    the twin then read partials no block wrote and wrote past the partials buffer."""
    p = _layernorm((8, 16, 32), 4)
    params = [replace(q, strategy="split", block=512, vec=4, unroll=1, onepass=onepass) for q in p.defaults()]
    g = p.fused[0].group
    assert chunks(g, params[0]) != chunks(g, replace(params[0], vec=1))  # the case that went wrong
    torch.manual_seed(1)
    x = torch.randn(4, 8, 16, 32) * 3.0 + 100.0
    for inp, kernel in ((x, "kv_fused_0_s0"), (_misaligned(x), "kv_fused_0_v1_s0")):
        got, want, launched = _run(p, params, inp)
        assert launched[0] == kernel
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_a_scalar_twin_keeps_the_chunks_and_partials_of_its_vector_kernel():
    p = _layernorm((8, 16, 32), 4)
    params = [replace(q, strategy="split", block=512, vec=4) for q in p.defaults()]
    cuda = re.search(r"_KV_SRC = r'''(.*?)'''", p.source(params), re.DOTALL).group(1)
    twin = cuda.index("kv_fused_0_v1_s0")
    geometry = lambda text: (re.findall(r"kbeg = c \* (\d+)u", text), re.findall(r"r \* (\d+)u \+ [ct]\]", text))  # noqa: E731
    assert geometry(cuda[:twin]) == geometry(cuda[twin:]) and geometry(cuda[:twin])[0]


@pytest.mark.parametrize("vec", [1, 4])
def test_one_pass_statistics_stay_exact_on_a_long_walk_by_one_thread(vec):
    """A thread per row of 65536 values around 1000: an uncompensated Welford mean stops moving once
    d / n is under half its ulp (about 1e-3 off here, against 1e-5 for the two-pass walk)."""
    p = _layernorm((65536,), 2)
    torch.manual_seed(2)
    x = torch.randn(2, 65536) + 1000.0
    for onepass in (True, False):
        params = [replace(q, strategy="thread", block=64, vec=vec, unroll=1, onepass=onepass) for q in p.defaults()]
        got, want, _ = _run(p, params, x)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("strategy", ["block", "warp", "split"])
@pytest.mark.parametrize(("vec", "unroll"), [(2, 2), (4, 1), (4, 4)])
def test_vector_and_one_pass_walks_match_the_module_aligned_or_not(strategy, vec, unroll):
    p = _layernorm((6, 64), 8)  # rows of 384: a tail in every walk (384 / (64 * vec) is not whole)
    params = [replace(q, strategy=strategy, block=64, vec=vec, unroll=unroll, onepass=True) for q in p.defaults()]
    torch.manual_seed(3)
    x = torch.randn(8, 6, 64) * 2.0 + 50.0
    for inp in (x, _misaligned(x)):
        got, want, _ = _run(p, params, inp)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("strategy", ["thread", "warp", "block", "split"])
def test_one_pass_softmax_adds_nothing_for_a_run_of_minus_inf(strategy):
    """Causal attention rows (KernelBench L3 43/44): masked_fill(-inf) leaves runs of -inf, and a thread whose values
    so far are all -inf has a running max of -inf; exp(x - max) was then exp(-inf + inf) = NaN (found on the H100)."""
    src = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
           "        return torch.softmax(x, dim=-1)\n\n\ndef get_inputs():\n    return [torch.randn(64, 256)]\n\n\n"
           "def get_init_inputs():\n    return []\n")
    p = plan(problem_from_source(src, name="masked_rows"))
    params = [replace(q, strategy=strategy, block=64, vec=4, unroll=1, onepass=True) for q in p.defaults()]
    ns = cuda_cpu.load(p.source(params))
    torch.manual_seed(4)
    x = torch.randn(64, 256)
    x = x.masked_fill(torch.ones(256, 256).tril()[::4][:64] == 0, float("-inf"))  # row r keeps 4r + 1 values
    x[1] = x[1].flip(0)  # and a row that starts with its run of -inf
    got = ns["_kv_launch_0"](x)
    torch.testing.assert_close(got, torch.softmax(x.double(), dim=-1).float(), rtol=1e-5, atol=1e-6)
