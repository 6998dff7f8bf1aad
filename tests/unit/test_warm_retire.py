"""The warm judge service (sandbox/parent/warm_service.py) drops its sandbox after an evaluation that ended in
infra_error: the judge may be what broke (red team 6: a candidate's native code lowered the warm judge's open-file
limit and every later evaluation through the service was infra_error until `warm-stop`). The next request gets a new
judge; an ordinary verdict keeps the warm one."""

from __future__ import annotations

from pathlib import Path

from kevolve.contract import problem_from_source
from kevolve.records import Candidate, Evaluation, Outcome
from kevolve.sandbox.parent.warm_key import ServiceFiles, WarmKey
from kevolve.sandbox.parent.warm_service import Service

PROBLEM = problem_from_source("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                              "        return torch.relu(x)\ndef get_inputs():\n    return [torch.randn(8)]\n"
                              "def get_init_inputs():\n    return []\n", "relu.py")


class Box:
    """A sandbox whose verdict is given; counts its closes."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome, self.closed, self.progress = outcome, 0, None

    def reference(self, problem, config) -> None:  # noqa: ANN001
        pass

    def forget(self) -> None:
        pass

    def evaluate(self, problem, cand, config) -> Evaluation:  # noqa: ANN001
        return Evaluation(candidate_id=cand.id, problem_id=problem.id, outcome=self.outcome, reason=self.outcome.value)

    def close(self) -> None:
        self.closed += 1


class Peer:
    def send(self, msg: object) -> None:
        pass


def judged(service: Service, box: Box) -> dict:
    service.box = box
    cand = Candidate.from_source("class ModelNew: pass\n", PROBLEM.id)
    reply, after = service._judge_one({"problem": PROBLEM.model_dump(mode="json"),
                                       "candidate": cand.model_dump(mode="json"),
                                       "config": {"device": "cpu"}}, Peer())  # type: ignore[arg-type]
    return {"reply": reply, "after": after}


def test_an_infra_error_retires_the_warm_judge_and_an_ordinary_verdict_keeps_it(tmp_path: Path) -> None:
    key = WarmKey({"device": "cpu", "backend": "local", "isolation": "auto"})
    service = Service(ServiceFiles(tmp_path, key.digest), key, idle_s=60)
    broken = Box(Outcome.INFRA_ERROR)
    got = judged(service, broken)
    assert got["reply"]["evaluation"]["outcome"] == "infra_error" and got["after"] is None
    assert service.box is None and broken.closed == 1  # the next request makes a new sandbox
    fine = Box(Outcome.INCORRECT)
    got = judged(service, fine)
    assert got["reply"]["evaluation"]["outcome"] == "incorrect" and service.box is fine and fine.closed == 0
