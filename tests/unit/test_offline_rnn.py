"""Recurrent layers as a candidate (offline/kernels_direct/rnn.py): the real codegen's launcher, run on
the CPU with its gate kernel's torch twin, against nn.LSTM / nn.GRU / nn.RNN themselves, with every
output the problems return (the sequence, h_n, c_n), bidirectional and multi-layer; and the gate kernel
compiles with NVRTC."""

from __future__ import annotations

import pytest
import torch
from kevolve.offline.coverage import compile_all, reference
from kevolve.offline.generate import plan
from kevolve.offline.graph.interpret import run_plan

from kevolve.contract import problem_from_source

TEMPLATE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.{cls}(5, 6, {layers}, batch_first={batch_first}, bidirectional={bidir}{extra})

    def forward(self, {args}):
        out, state = self.rnn({call})
        return torch.cat([out.reshape(-1)] + [s.reshape(-1) for s in {states_of}])


def get_inputs():
    x = torch.randn(3, 7, 5) if {batch_first} else torch.randn(7, 3, 5)
    return [x] + [torch.randn({layers} * {dirs}, 3, 6) for _ in range({states})]


def get_init_inputs():
    return []
'''

CASES = {
    "lstm_bidirectional_two_layers_with_h0_c0": {"cls": "LSTM", "layers": 2, "batch_first": True, "bidir": True,
                                                 "extra": "", "args": "x, h0, c0", "call": "x, (h0, c0)", "states": 2},
    "lstm_from_zero_state": {"cls": "LSTM", "layers": 1, "batch_first": False, "bidir": False, "extra": "",
                             "args": "x", "call": "x", "states": 0},
    "gru_bidirectional_three_layers_with_h0": {"cls": "GRU", "layers": 3, "batch_first": False, "bidir": True,
                                               "extra": "", "args": "x, h0", "call": "x, h0", "states": 1},
    "gru_without_bias": {"cls": "GRU", "layers": 2, "batch_first": True, "bidir": False, "extra": ", bias=False",
                         "args": "x, h0", "call": "x, h0", "states": 1},
    "rnn_relu_bidirectional": {"cls": "RNN", "layers": 2, "batch_first": True, "bidir": True,
                               "extra": ", nonlinearity='relu'", "args": "x", "call": "x", "states": 0},
}


def _problem(case: dict):
    states_of = "state" if case["cls"] == "LSTM" else "(state,)"  # (h_n, c_n), or h_n alone
    src = TEMPLATE.format(dirs=2 if case["bidir"] else 1, states_of=states_of, **case)
    return problem_from_source(src, "rnn_case.py")


@pytest.mark.parametrize("name", list(CASES))
def test_recurrent_candidate_matches_the_torch_module(name):
    problem = _problem(CASES[name])
    p = plan(problem)
    assert [f.group.kind for f in p.fused if f.group.kind == "rnn"] == ["rnn"]
    model, inputs = reference(problem)
    with torch.no_grad():
        want = model(*inputs)
        got = run_plan(p, model, inputs)
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=2e-6, rtol=1e-5), float((got - want).abs().max())


def test_recurrent_candidate_is_library_gemms_around_one_gate_kernel_that_compiles():
    problem = _problem(CASES["lstm_bidirectional_two_layers_with_h0_c0"])
    src = plan(problem).source()
    launcher = src[src.index("def _kv_launch_0"):src.index("\n\n", src.index("def _kv_launch_0"))]
    assert launcher.count("_kv_launch(") == 1  # one kernel launch per step: gates, c and h together
    assert launcher.count("torch.addmm(") == 2  # all timesteps' input projection; each step's recurrent product
    assert compile_all([src]) == ""


def test_the_search_tries_a_lone_recurrent_group_as_a_cuda_graph():
    """A GRU is one group but two launches a step (6 layers x 512 steps in KernelBench L3 39: 0.37x torch.compile
    on the H100, the graph never tried because the forward had a single group)."""
    from test_offline_search import fake_verdict

    from kevolve.offline.search import search

    p = plan(_problem(CASES["gru_without_bias"]))
    assert len(p.fused) == 1 and p.fused[0].group.kind == "rnn"
    res = search(p, lambda got: fake_verdict(got, p.problem.id), budget=2)
    assert [t.params[0].graph for t in res.trials] == [False, True]
