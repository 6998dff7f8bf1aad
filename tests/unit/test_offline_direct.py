"""Direct kernels (convolution, pooling, scans, argmax / argmin) for modules with nothing to fuse:
the twin of each kernel (built from the kernel's own index formulas where it has any) matches the
module on the CPU, and every generated kernel compiles with NVRTC for compute_90."""

from __future__ import annotations

import pytest
import torch
from kevolve.offline.coverage import compile_all, ir_error
from kevolve.offline.generate import plan
from offline_cases import DIRECT, direct_problem


@pytest.mark.parametrize("name", DIRECT)
def test_direct_kernel_twin_matches_the_module_on_cpu(name):
    p = plan(direct_problem(name))
    assert len(p.fused) == 1 and p.fused[0].group.kind in ("conv", "pool", "scan", "argreduce")
    why, _ = ir_error(p.problem)
    assert why == "", why


def test_conv_twin_catches_a_wrong_index_formula():
    """The conv twin reads the input by the kernel's formulas: a wrong dilation in the spec is a mismatch."""
    from dataclasses import replace

    from kevolve.offline.coverage import reference
    from kevolve.offline.graph.interpret import run_plan

    p = plan(direct_problem("conv2d_grouped_dilated"))
    model, inputs = reference(p.problem)
    torch.testing.assert_close(run_plan(p, model, inputs), model(*inputs), rtol=1e-4, atol=1e-5)
    g = p.fused[0].group
    g.spec = replace(g.spec, dilation=(1, 1))
    assert not torch.allclose(run_plan(p, model, inputs), model(*inputs))


def test_every_direct_kernel_compiles_with_nvrtc():
    """All cases' kernels (each under two parameter settings) as one NVRTC program: one compile."""
    from dataclasses import replace

    sources = []
    for name in DIRECT:
        p = plan(direct_problem(name))
        sources += [p.source(), p.source([replace(x, block=512, unroll=4, ilp=2) for x in p.defaults()])]
    assert compile_all(sources) == ""


def test_conv_threads_take_as_many_output_channels_as_divide_a_group():
    from dataclasses import replace

    from kevolve.offline.kernels_direct.conv import tile

    def tiles(name):
        p = plan(direct_problem(name))
        return [tile(p.fused[0].group, replace(p.defaults()[0], ilp=i)) for i in (1, 2, 4)]

    assert tiles("conv2d_eight_channels") == [1, 2, 4]
    assert tiles("conv_transpose1d") == [1, 2, 2]  # 2 output channels
    assert tiles("conv2d_grouped_dilated") == [1, 1, 1]  # 3 output channels per group


@pytest.mark.parametrize("name", [n for n in DIRECT if "pool" in n])
def test_pooling_kernels_run_on_the_cpu_with_several_outputs_per_thread(name):
    """The generated CUDA (tests/cuda_cpu.py: g++ and a fiber shim) with 1, 2, 4 and 8 outputs of the last dim per
    thread, each input their windows share loaded once: equal to the module, NaN propagated by max pooling."""
    import re
    from dataclasses import replace

    import cuda_cpu
    from kevolve.offline.kernels_direct.pool import tile
    from kevolve.offline.graph.trace import load_namespace

    if not cuda_cpu.available():
        pytest.skip("needs g++ on x86-64 Linux")
    p = plan(direct_problem(name))
    ns = load_namespace(p.problem)
    torch.manual_seed(0)
    model = ns["Model"]().eval()
    x = ns["get_inputs"]()[0]
    x[..., 1] = float("nan")
    with torch.no_grad():
        want = model(x)
    for ilp in (1, 2, 4, 8):
        params = [replace(q, ilp=ilp) for q in p.defaults()]
        src = p.source(params)
        got = cuda_cpu.load(src)["_kv_launch_0"](x)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
        r = tile(p.fused[0].group, params[0])
        s = p.fused[0].group.spec
        span = len({o * s.stride[-1] + k * s.dilation[-1] for o in range(r) for k in range(s.kernel[-1])})
        assert len(re.findall(r"__ldg\(xc \+", src)) == span  # one load per input of the runs' windows


def test_a_pooling_thread_takes_the_fewest_outputs_that_load_at_most_three_inputs_each():
    from kevolve.offline.kernels_direct.pool import PoolSpec
    from kevolve.offline.space import _pool_run

    def run(k, stride, dilation):
        return _pool_run(PoolSpec("max", 1, (64,), (64,), (k,), (stride,), (0,), (dilation,)))

    assert [run(8, 1, 1), run(8, 1, 3), run(4, 2, 1), run(3, 2, 2)] == [4, 8, 2, 1]  # L1 44, L1 41, …
