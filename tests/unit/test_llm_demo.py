"""`--llm demo` (agent/llm/demo.py): the project's recorded replies, no key, no network."""

from __future__ import annotations

import subprocess
import sys

import pytest
from testpaths import FIXTURES

from kevolve.agent.extract import extract_code
from kevolve.agent.llm import make_llm
from kevolve.agent.llm.base import Message
from kevolve.agent.settings import llm_config
from kevolve.sandbox.policy.candidate import check_policy


def _ask(llm, task: str) -> str:  # noqa: ANN001
    return llm.complete([Message(role="user", content=f"Task: {task}\n\n## The module\n...")]).text


def test_demo_needs_no_key_and_answers_each_operator_in_turn() -> None:
    llm = make_llm(llm_config("demo", None, {}, None))
    drafts = [_ask(llm, "translate") for _ in range(3)]
    assert len(set(drafts)) == 3  # islands get different first drafts
    mutations = [_ask(llm, "mutate") for _ in range(3)]
    assert "return torch.relu(x)" in mutations[0] and "_ext.relu_into" in mutations[1]
    assert "i + 4 <= n" in mutations[2] and "i + 4 <= n" in _ask(llm, "crossover")
    assert "typo" in drafts[0] and "numel()\n" in drafts[0]  # the draft the loop must repair
    assert "numel();" in _ask(llm, "repair")
    assert "relu.py on the CPU only" in _ask(llm, "something else") and "```" not in _ask(llm, "something else")


def test_every_demo_kernel_passes_the_candidate_policy() -> None:
    """A demo whose code the policy refused would show the wrong thing: every reply's code is a candidate."""
    llm = make_llm(llm_config("demo", None, {}, None))
    replies = {_ask(llm, t) for t in ["translate"] * 3 + ["repair"] + ["mutate"] * 3 + ["crossover"]}
    for reply in replies:
        code = extract_code(reply).source
        assert code and "class ModelNew" in code
        assert check_policy(code) is None, code[:200]


@pytest.mark.parametrize(("args", "says"), [
    (["--device", "cpu", str(FIXTURES / "problems" / "softmax.py")], "recorded replies for tests/fixtures/problems/relu.py"),
])
def test_demo_on_another_problem_is_one_line(args: list[str], says: str) -> None:
    r = subprocess.run([sys.executable, "-m", "kevolve.cli", "optimize", "--llm", "demo", *args], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and says in r.stderr, r.stderr
