"""Project-written offline-proposer cases shared by the CPU tests (IR twins, NVRTC) and the GPU test
(generated kernels run against the module): modules with nothing to fuse (direct kernels) and calls
the offline proposer rewrites (losses, einsum, attention, Python-number inputs)."""

from __future__ import annotations

from kevolve.contract import problem_from_source

from kevolve.records import Problem

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


REWRITE_TEMPLATE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = {module}

    def forward(self, *args):
        return {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''

PAIR = "torch.randn(5, 40) * 2, torch.randn(5, 40)"
REWRITES = {
    "smooth_l1_functional": ("None", "F.smooth_l1_loss(args[0], args[1])", PAIR),
    "smooth_l1_module_sum": ("nn.SmoothL1Loss(beta=0.5, reduction='sum')", "self.loss(args[0], args[1])", PAIR),
    "huber": ("nn.HuberLoss(delta=0.7)", "self.loss(args[0], args[1])", PAIR),
    "mse_plus_l1": ("None", "F.mse_loss(args[0], args[1]) + F.l1_loss(args[0], args[1])", PAIR),
    "triplet": ("nn.TripletMarginLoss(margin=0.5)", "self.loss(args[0], args[1], args[2])",
                "torch.randn(6, 30), torch.randn(6, 30), torch.randn(6, 30)"),
    "cross_entropy": ("None", "F.cross_entropy(args[0], args[1])", "torch.randn(6, 30), torch.randint(0, 30, (6,))"),
    "cross_entropy_ignore_index": ("nn.CrossEntropyLoss(ignore_index=3)", "self.loss(args[0], args[1])",
                                   "torch.randn(6, 5), torch.tensor([3, 1, 0, 3, 4, 2])"),
    "einsum_4d_by_matrix": ("None", "torch.einsum('bijl,lk->bijk', args[0], args[1])",
                            "torch.randn(2, 3, 5, 7), torch.randn(7, 6)"),
    "einsum_batched": ("None", "torch.einsum('bij,bjk->bik', args[0], args[1])", "torch.randn(2, 5, 7), torch.randn(2, 7, 6)"),
    "attention": ("None", "F.scaled_dot_product_attention(args[0], args[1], args[2])",
                  "torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 8)"),
    "attention_scaled": ("None", "F.scaled_dot_product_attention(args[0], args[1], args[2], scale=0.3)",
                         "torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 8)"),
    "python_number_input": ("None", "(args[0] + 1.0) * args[1]", "torch.randn(5, 40), 2.5"),
}



DIRECT = [*LAYERS, *FORWARDS]


def direct_problem(name: str) -> Problem:
    """A module that is one layer (LAYERS) or one forward expression (FORWARDS)."""
    if name in LAYERS:
        layer, shape = LAYERS[name]
        return problem_from_source(_MODULE.format(layer=layer, shape=shape), f"{name}.py")
    args, body, shape, extra, dim = FORWARDS[name]
    return problem_from_source(_FORWARD.format(args=args, body=body, shape=shape, extra=extra, dim=dim), f"{name}.py")


def rewrite_problem(name: str) -> Problem:
    """A module whose forward is one call the offline proposer rewrites (REWRITES)."""
    module, body, inputs = REWRITES[name]
    return problem_from_source(REWRITE_TEMPLATE.format(module=module, body=body, inputs=inputs), f"{name}.py")


def triton_check(*args: str, timeout: float = 600) -> dict:
    """tests/triton_interpret_check.py in a process of its own (TRITON_INTERPRET is set before triton's import
    there, which a pytest session cannot promise); its JSON answer."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parent / "triton_interpret_check.py"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=timeout, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
