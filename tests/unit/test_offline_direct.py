"""Direct kernels (convolution, pooling, scans, argmax / argmin) for modules with nothing to fuse:
the twin of each kernel (built from the kernel's own index formulas where it has any) matches the
module on the CPU, and every generated kernel compiles with NVRTC for compute_90."""

from __future__ import annotations

import pytest
import torch
from kevolve.agent.offline.coverage import compile_all, ir_error
from kevolve.agent.offline.generate import plan
from kevolve.kernelbench.problem import problem_from_source

_MODULE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = nn.{layer}

    def forward(self, x):
        return self.op(x)


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
'''

_FORWARD = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x{args}):
        return {body}


def get_inputs():
    x = torch.randn({shape})
    return [x{extra}]


def get_init_inputs():
    return [{dim}]
'''

LAYERS = {
    "conv2d_grouped_dilated": ("Conv2d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2)", "2, 4, 11, 9"),
    "conv2d_eight_channels": ("Conv2d(3, 8, 3)", "1, 3, 6, 6"),
    "conv1d_no_bias": ("Conv1d(3, 5, 4, stride=3, padding=2, bias=False)", "2, 3, 20"),
    "conv3d_asymmetric": ("Conv3d(2, 3, (2, 3, 1), stride=(1, 2, 1), padding=(0, 1, 0))", "2, 2, 5, 6, 4"),
    "conv_transpose2d": (("ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=1, output_padding=1, groups=2, "
                          "dilation=2)"), "2, 4, 7, 5"),
    "conv_transpose1d": ("ConvTranspose1d(3, 2, 5, stride=3, padding=2, dilation=2, output_padding=2)", "2, 3, 9"),
    "conv_transpose3d_depthwise": ("ConvTranspose3d(4, 4, 3, stride=2, padding=1, groups=4)", "1, 4, 5, 4, 3"),
    "maxpool1d_dilated": ("MaxPool1d(4, stride=1, padding=2, dilation=3)", "2, 3, 30"),
    "maxpool2d_ceil": ("MaxPool2d(3, stride=2, padding=1, dilation=2, ceil_mode=True)", "2, 3, 13, 10"),
    "maxpool3d": ("MaxPool3d(3, stride=2, padding=1)", "1, 2, 9, 8, 7"),
    "avgpool1d": ("AvgPool1d(4, stride=2, padding=2)", "2, 3, 21"),
    "avgpool2d_exclude_pad": ("AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)",
                              "2, 3, 10, 9"),
    "avgpool3d_divisor": ("AvgPool3d((3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1), divisor_override=5)",
                          "1, 2, 7, 6, 5"),
}

EXCLUSIVE = ("torch.cat((torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)), "
             "torch.cumsum(x.narrow(dim=self.dim, start=0, length=x.size(self.dim) - 1), dim=self.dim)), dim=self.dim)")
FORWARDS = {
    "cumsum_rows": ("", "torch.cumsum(x, dim=self.dim)", "3, 1500", "", 1),
    "cumsum_inner_dim": ("", "torch.cumsum(x, dim=self.dim)", "3, 50, 5", "", 1),
    "cumprod": ("", "torch.cumprod(x, dim=self.dim)", "3, 40", "", -1),
    "cumsum_reverse": ("", "torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)", "3, 70", "", 1),
    "cumsum_reverse_inner": ("", "torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)", "3, 7, 4", "", 1),
    "cumsum_exclusive": ("", EXCLUSIVE, "3, 33", "", 1),
    "cumsum_masked": (", mask", "torch.cumsum(x * mask, dim=self.dim)", "3, 2000", ", torch.rand(x.shape) > 0.5", 1),
    "argmax_inner_dim": ("", "torch.argmax(x, dim=self.dim)", "3, 50, 5", "", 1),
    "argmin_rows": ("", "torch.argmin(x, dim=self.dim)", "3, 50", "", 1),
    "argmax_all": ("", "x.argmax()", "3, 50", "", 1),
}


def _problem(name: str):
    if name in LAYERS:
        layer, shape = LAYERS[name]
        return problem_from_source(_MODULE.format(layer=layer, shape=shape), f"{name}.py")
    args, body, shape, extra, dim = FORWARDS[name]
    return problem_from_source(_FORWARD.format(args=args, body=body, shape=shape, extra=extra, dim=dim), f"{name}.py")


@pytest.mark.parametrize("name", [*LAYERS, *FORWARDS])
def test_direct_kernel_twin_matches_the_module_on_cpu(name):
    p = plan(_problem(name))
    assert len(p.fused) == 1 and p.fused[0].group.kind in ("conv", "pool", "scan", "argreduce")
    why, _ = ir_error(p.problem)
    assert why == "", why


def test_conv_twin_catches_a_wrong_index_formula():
    """The conv twin reads the input by the kernel's formulas: a wrong dilation in the spec is a mismatch."""
    from dataclasses import replace

    from kevolve.agent.offline.coverage import _reference
    from kevolve.agent.offline.interpret import run_plan

    p = plan(_problem("conv2d_grouped_dilated"))
    model, inputs = _reference(p.problem)
    torch.testing.assert_close(run_plan(p, model, inputs), model(*inputs), rtol=1e-4, atol=1e-5)
    g = p.fused[0].group
    g.spec = replace(g.spec, dilation=(1, 1))
    assert not torch.allclose(run_plan(p, model, inputs), model(*inputs))


def test_every_direct_kernel_compiles_with_nvrtc():
    """All cases' kernels (each under two parameter settings) as one NVRTC program: one compile."""
    from dataclasses import replace

    sources = []
    for name in [*LAYERS, *FORWARDS]:
        p = plan(_problem(name))
        sources += [p.source(), p.source([replace(x, block=512, unroll=4, ilp=2) for x in p.defaults()])]
    assert compile_all(sources) == ""


def test_conv_threads_take_as_many_output_channels_as_divide_a_group():
    from dataclasses import replace

    from kevolve.agent.offline.conv import tile

    def tiles(name):
        p = plan(_problem(name))
        return [tile(p.fused[0].group, replace(p.defaults()[0], ilp=i)) for i in (1, 2, 4)]

    assert tiles("conv2d_eight_channels") == [1, 2, 4]
    assert tiles("conv_transpose1d") == [1, 2, 2]  # 2 output channels
    assert tiles("conv2d_grouped_dilated") == [1, 1, 1]  # 3 output channels per group
