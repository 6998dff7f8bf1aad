"""Capture past what torch.fx gives up on (offline/graph/capture.py): slicing with traced sizes, a
submodule with a data-dependent branch kept in PyTorch as a leaf, arguments left at their default, and a
problem whose own dependency is missing. Each candidate is made by the real codegen and checked against
the module on the CPU (the coverage check: the IR with torch twins against the module's output)."""

from __future__ import annotations

import re

import pytest
import torch
from kevolve.offline.coverage import Verdict, check, reference
from kevolve.offline.generate import plan
from kevolve.offline.graph.interpret import run_plan
from kevolve.offline.graph.trace import TraceError, load_namespace

from kevolve.contract import problem_from_source

SLICE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(n, n)).view(1, n, n))

    def forward(self, x, scale=None):
        B, T, C = x.size()
        if scale is None:
            scale = 1.0 / C
        att = (x @ x.transpose(1, 2)) * scale
        att = att.masked_fill(self.bias[:, :T, :T] == 0, float("-inf"))
        return torch.softmax(att, dim=-1)


def get_inputs():
    return [torch.randn(2, 5, 4)]


def get_init_inputs():
    return [8]
'''

BRANCH = '''
import torch
import torch.nn as nn


class Gate(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2.0
        return x - 1.0


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = Gate()

    def forward(self, x):
        return torch.relu(self.gate(torch.tanh(x) + 0.5)) * 3.0 + 1.0


def get_inputs():
    return [torch.rand(4, 6)]


def get_init_inputs():
    return []
'''


def _problem(src: str):
    return problem_from_source(src, "capture_case.py")


def test_plain_fx_cannot_trace_the_fixtures():
    """What the other tests show is capture's doing: fx alone refuses both modules."""
    for src in (SLICE, BRANCH):
        ns = load_namespace(_problem(src))
        with pytest.raises(Exception):  # noqa: B017 — fx's TraceError or a Proxy TypeError, by torch version
            torch.fx.symbolic_trace(ns["Model"](*ns["get_init_inputs"]()))


def test_a_module_slicing_with_traced_sizes_gets_a_candidate_that_matches_it():
    problem = _problem(SLICE)
    cov = check(problem)
    assert cov.verdict is Verdict.COVERED, cov.reason
    assert cov.groups and cov.max_err is not None and cov.max_err < 1e-5
    src = plan(problem).source()
    assert "_kv_launch_0(" in src  # a generated kernel does the softmax, not the reference forward
    # `scale` was traced at its default: the candidate runs the reference when it is given
    # (fx names the parameter `scale_1`: callers pass it by position, as the evaluator does)
    assert re.search(r"if self\.training or (scale\w*) is not None or .*\n\s+return super\(\)\.forward\(x, \1\)", src)


def test_a_data_dependent_branch_stays_pytorch_and_the_rest_is_covered():
    problem = _problem(BRANCH)
    cov = check(problem)
    assert cov.verdict is Verdict.COVERED, cov.reason
    p = plan(problem)
    calls = {str(n.target) for n in p.traced.gm.graph.nodes if n.op == "call_module"}
    assert calls == {"gate"}  # the branch is a leaf kept in PyTorch
    assert len(p.fused) == 2  # tanh + add before it, relu * 3 + 1 after it: generated kernels
    model, (x,) = reference(problem)
    for sign in (1.0, -1.0):  # both sides of the branch, decided at run time by the leaf
        xs = sign * (x + 1.0)
        with torch.no_grad():
            assert torch.allclose(run_plan(p, model, [xs]), model(xs), atol=1e-6)


def test_a_missing_problem_dependency_is_named_in_one_line():
    src = "import kv_no_such_package_xyz\n" + BRANCH
    with pytest.raises(TraceError, match=r"imports 'kv_no_such_package_xyz', which is not installed"):
        plan(_problem(src))


EINOPS = '''
import torch
import torch.nn as nn
from einops import rearrange


class Model(nn.Module):
    def forward(self, x):
        y = rearrange(x, "b (c l) h -> b c l h", l=2)
        T = y.size(2)
        mask = torch.tril(torch.ones(T, T, device=x.device, dtype=bool))
        z = y.sum(-1, keepdim=True) * 0.5
        return torch.exp(z.masked_fill(~mask[:, :1], -1.0)) + 1.0


def get_inputs():
    return [torch.randn(2, 4, 3)]


def get_init_inputs():
    return []
'''


def test_einops_calls_and_python_dtypes_are_captured_and_stay_library_calls():
    """A problem's own einops (Mamba2, installed by the `kernelbench` extra) rejects fx's proxies; it is
    recorded as a call, and `dtype=bool` (a Python type fx cannot spell) as torch.bool."""
    pytest.importorskip("einops", reason="the kernelbench extra (pip install -e '.[kernelbench]')")
    problem = _problem(EINOPS)
    cov = check(problem)
    assert cov.verdict is Verdict.COVERED, cov.reason
    src = plan(problem).source()
    assert re.search(r"= \w*rearrange\w*\(x, 'b \(c l\) h -> b c l h', l = 2\)", src)  # einops itself, at run time
    assert "_symbolic_trace.wrap" not in src  # fx's tracing directive is not part of the candidate


STATE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.randn(2, 3)
        self.i2h = nn.Linear(7, 3)
        self.h2o = nn.Linear(3, 5)

    def forward(self, x, initial_hidden):
        self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        self.hidden = torch.tanh(self.i2h(torch.cat((x, self.hidden), dim=1)))
        return self.h2o(self.hidden)


def get_inputs():
    return [torch.rand(2, 4), torch.rand(2, 3)]


def get_init_inputs():
    return []
'''


def test_an_attribute_assigned_in_forward_is_not_left_a_proxy():
    """VanillaRNN's `self.hidden = tanh(...)`: tracing assigns a Proxy to the module, which the graph's
    get_attr then read (every node after it lost its shape: 'nothing to fuse')."""
    problem = _problem(STATE)
    p = plan(problem)
    assert isinstance(p.traced.gm.hidden, torch.Tensor) and isinstance(p.traced.model.hidden, torch.Tensor)
    cov = check(problem)
    assert cov.verdict is Verdict.COVERED, cov.reason
    assert any("pointwise" in g for g in cov.groups)  # the tanh is a generated kernel
