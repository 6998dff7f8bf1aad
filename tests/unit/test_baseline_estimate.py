"""A baseline worker's estimate of the memory its prepared problem holds (sandbox/judge/baseline_worker.py)."""

from __future__ import annotations

from pathlib import Path

from kevolve.sandbox.judge.baseline_worker import estimate_bytes
from kevolve.sandbox.common.harness import load_module

FLUSH_CPU = 64 * 2**20

LINEAR = '''
import torch
class Model(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = torch.nn.Linear(n_in, n_out)
    def forward(self, x):
        return self.fc(x)
def get_inputs():
    return [torch.randn(4, 16)]
def get_init_inputs():
    return [16, 8]
'''

DATA_DEPENDENT = '''
import torch
class Model(torch.nn.Module):
    def forward(self, x, y):
        return x[: int(y.sum().item())]
def get_inputs():
    return [torch.randn(64, 32), torch.ones(2)]
def get_init_inputs():
    return []
'''

HOST_ONLY = '''
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.tensor(torch.randn(8).tolist())]
def get_init_inputs():
    return []
'''


def _problem(tmp_path: Path, source: str, name: str):  # noqa: ANN202
    return load_module(source, name, tmp_path)


def test_estimate_counts_weights_each_pooled_input_set_outputs_and_the_flush_buffer(tmp_path: Path) -> None:
    weights, inputs, output = (16 * 8 + 8) * 4, 4 * 16 * 4, 4 * 8 * 4
    got = estimate_bytes(_problem(tmp_path, LINEAR, "est_linear"), 3, "cpu")
    assert got == weights + 3 * inputs + 4 * output + FLUSH_CPU


def test_estimate_takes_the_largest_input_as_output_when_the_forward_has_no_meta_kernel(tmp_path: Path) -> None:
    inputs = 64 * 32 * 4 + 2 * 4
    got = estimate_bytes(_problem(tmp_path, DATA_DEPENDENT, "est_data_dependent"), 1, "cpu")
    assert got == inputs + 4 * (64 * 32 * 4) + FLUSH_CPU


def test_estimate_is_none_when_the_inputs_cannot_be_drawn_on_the_meta_device(tmp_path: Path) -> None:
    assert estimate_bytes(_problem(tmp_path, HOST_ONLY, "est_host_only"), 4, "cpu") is None
