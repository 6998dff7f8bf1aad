"""`kevolve.optimize(...)`: a module instance and example tensors in, a Result with a drop-in ModelNew out."""

from __future__ import annotations

import sys

import pytest
import torch

import kevolve
from kevolve.agent.llm.scripted import ScriptedLLM
from kevolve.records import Evaluation, Outcome, TimingStats

FAST = """```python
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float = 2.0):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x.clamp_min(0) * self.scale
```"""


class OkSandbox:
    """Every candidate correct and twice as fast as eager; records the problems it was given."""

    def __init__(self) -> None:
        self.problems = []

    def evaluate(self, problem, candidate, config) -> Evaluation:  # noqa: ANN001
        self.problems.append(problem)
        t = lambda ms: TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0, trials=3, method="x")  # noqa: E731
        return Evaluation(candidate_id=candidate.id, problem_id=problem.id, outcome=Outcome.OK, reason="ok",
                          timing=t(0.5), ref_timing=t(1.0))


def test_optimize_a_module_instance_returns_a_drop_in_replacement(fixtures, tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(fixtures / "modules"))
    from user_layers import ScaledRelu

    sandbox = OkSandbox()
    result = kevolve.optimize(ScaledRelu(3.0), inputs=[torch.randn(4, 8)], init=[3.0],
                              llm=ScriptedLLM([("Task:", [FAST])]), device="cpu", max_candidates=2,
                              runs_dir=tmp_path, archive=False, sandbox=sandbox, env={}, llm_cache=False)
    assert result.speedup == pytest.approx(2.0) and result.best_path is not None
    problem = sandbox.problems[0].source
    assert "Model = ScaledRelu" in problem and "get_init_inputs" in problem and "(4, 8, )" in problem
    ModelNew = result.load_model_class()  # noqa: N806
    x = torch.randn(4, 8)
    assert torch.equal(ModelNew(3.0)(x), ScaledRelu(3.0)(x))
    sys.modules.pop("user_layers", None)


class SlowSandbox(OkSandbox):
    """Every candidate correct and at 0.23x of eager's speed."""

    def evaluate(self, problem, candidate, config) -> Evaluation:  # noqa: ANN001
        ev = super().evaluate(problem, candidate, config)
        return ev.model_copy(update={"timing": ev.timing.model_copy(update={"median_ms": 1.0 / 0.23})})


def test_optimize_hands_back_the_original_module_when_nothing_beat_eager(fixtures, tmp_path, monkeypatch,
                                                                          caplog) -> None:
    monkeypatch.syspath_prepend(str(fixtures / "modules"))
    from user_layers import ScaledRelu

    with caplog.at_level("WARNING", logger="kevolve"):
        result = kevolve.optimize(ScaledRelu(3.0), inputs=[torch.randn(4, 8)], init=[3.0],
                                  llm=ScriptedLLM([("Task:", [FAST])]), device="cpu", max_candidates=1,
                                  runs_dir=tmp_path, archive=False, sandbox=SlowSandbox(), env={}, llm_cache=False)
        Model = result.load_model_class()  # noqa: N806
    assert result.answer == "not_faster" and result.speedup == pytest.approx(0.23)
    assert "nothing beat eager (best 0.23x): keep your module" in caplog.text
    x = torch.randn(4, 8)
    assert Model.__name__ == "ScaledRelu" and torch.equal(Model(3.0)(x), ScaledRelu(3.0)(x))
    sys.modules.pop("user_layers", None)


def test_optimize_by_path_and_class_with_input_specs(fixtures, tmp_path) -> None:
    sandbox = OkSandbox()
    target = f"{fixtures / 'modules' / 'user_layers.py'}:ScaledRelu"
    result = kevolve.optimize(target, init="1.5", inputs=["float32[2,3]"], llm=ScriptedLLM([("Task:", [FAST])]),
                              device="cpu", max_candidates=1, runs_dir=tmp_path, archive=False, sandbox=sandbox,
                              env={}, llm_cache=False)
    assert result.evaluated == 1 and result.stop_reason.startswith("max_candidates")
    assert "return [1.5]" in sandbox.problems[0].source
    assert (result.run_dir / "problem.py").read_text() == sandbox.problems[0].source


def test_optimize_asks_the_llm_for_kernels_in_the_language_given(fixtures, tmp_path) -> None:
    llm = ScriptedLLM([("Task:", [FAST])])
    target = f"{fixtures / 'modules' / 'user_layers.py'}:ScaledRelu"
    # (on CUDA the first candidates are offline seeds: enough candidates for the LLM to be asked too)
    result = kevolve.optimize(target, init="1.5", inputs=["float32[2,3]"], llm=llm, device="cuda", language="triton",
                              max_candidates=6, runs_dir=tmp_path, archive=False, sandbox=OkSandbox(), env={},
                              llm_cache=False)
    assert llm.calls, result.stop_reason
    prompt = "\n".join(m.content for m in llm.calls[0])
    assert "Write Triton kernels" in prompt and "CuPy" not in prompt.split("Write Triton kernels")[0][-200:]
    assert '"language": "triton"' in (result.run_dir / "config.json").read_text()


@pytest.mark.parametrize(("device", "language", "message"), [
    ("cpu", "fortran", "--language must be one of cuda, cupy, triton, not 'fortran'"),
    ("cpu", "triton", "--language triton writes GPU kernels: it needs --device cuda"),
])
def test_optimize_refuses_a_language_the_cli_would_refuse_with_the_same_message(
        fixtures, tmp_path, device: str, language: str, message: str) -> None:
    from kevolve.agent.settings import SettingsError

    target = f"{fixtures / 'modules' / 'user_layers.py'}:ScaledRelu"
    with pytest.raises(SettingsError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        kevolve.optimize(target, init="1.5", inputs=["float32[2,3]"], llm=ScriptedLLM([]), device=device,
                         language=language, runs_dir=tmp_path, archive=False, sandbox=OkSandbox(), env={},
                         llm_cache=False)
