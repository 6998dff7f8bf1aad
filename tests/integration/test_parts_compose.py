"""A whole model composed of optimized parts, judged by the real evaluator on the CPU: the small ResNet (8 channels)
with its stem, residual blocks and head replaced by C++ part candidates is `ok` against the whole model; the same
with a residual block that drops its skip connection is `incorrect` as a whole."""

from __future__ import annotations

import pytest
from testpaths import FIXTURES

from kevolve.contract import problem_from_source
from kevolve.parts.compose import compose
from kevolve.parts.decompose import decompose
from kevolve.records import Candidate, Outcome, content_hash

PARTS = FIXTURES / "solutions" / "parts"


def tiny_resnet() -> str:
    """tests/fixtures/problems/small_resnet.py at 8 channels, 10 classes, batches of 2 images of 16x16."""
    src = (FIXTURES / "problems" / "small_resnet.py").read_text()
    return src.replace("torch.randn(32, 3, 64, 64)", "torch.randn(2, 3, 16, 16)").replace("return [64, 100]",
                                                                                          "return [8, 10]")


@pytest.fixture(scope="module")
def sandbox():  # noqa: ANN201
    from kevolve.sandbox.parent.local import LocalSandbox

    box = LocalSandbox()
    yield box
    box.close()


def test_composed_parts_are_judged_as_the_whole_model(sandbox, cpu_config) -> None:  # noqa: ANN001
    problem = problem_from_source(tiny_resnet(), "tiny_resnet.py")
    dec = decompose(problem)
    assert [p.paths for p in dec.parts] == [("stem",), ("blocks.0", "blocks.1"), ("head",)]

    def judge(block: str):  # noqa: ANN202
        src = compose(dec, {1: (PARTS / "stem_cpp.py").read_text(), 2: (PARTS / block).read_text(),
                            3: (PARTS / "head_cpp.py").read_text()})
        return sandbox.evaluate(problem, Candidate(id=content_hash(src), problem_id=problem.id, source=src), cpu_config)

    good = judge("block_cpp.py")
    assert good.outcome is Outcome.OK, good.reason
    assert {k.name.rpartition(".")[2] for k in good.profile.kernels if k.custom} >= {"bn_act", "linear"}  # the parts ran
    wrong = judge("block_wrong.py")
    assert wrong.outcome is Outcome.INCORRECT, wrong.reason
