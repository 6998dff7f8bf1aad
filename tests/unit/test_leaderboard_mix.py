"""The leaderboard mix's rule (kevolve.kernelbench.leaderboard.leaderboard_mix, issue 36's candidate set): refused and
duplicate kernels left out, problems whose Model class the suite changed left out (KernelBench renumbered level-1
problem 50 from a product reduction to a convolution: its leaderboard kernels are for another module), problems
spread over the numbers, and each problem's slowest and fastest kernel by the leaderboard's speedup."""

from __future__ import annotations

from testpaths import FIXTURES

from kevolve.agent.llm.replay import ReplaySample
from kevolve.kernelbench.leaderboard import leaderboard_mix

RELU = (FIXTURES / "problems" / "relu.py").read_text()
SOFTMAX = (FIXTURES / "problems" / "softmax.py").read_text()


def kernel(level: int, number: int, speedup: float, tag: str, source: str = RELU) -> ReplaySample:
    return ReplaySample(problem=f"level{level}/{number}_P", problem_source=source, model=tag,
                        code=f"# {tag}\nclass ModelNew: pass\n", speedup=speedup)


def test_the_mix_takes_each_spread_problems_slowest_and_fastest_and_leaves_out_refused_duplicate_and_changed() -> None:
    samples = [kernel(1, n, s, f"{n}-{s}") for n in (1, 2, 3, 4, 5, 6) for s in (0.9, 0.01, 2.5)]
    samples += [kernel(1, 7, 0.5, "7-a"), kernel(1, 7, 0.6, "7-a")]  # the same code twice: one kernel, too few
    samples += [kernel(1, 4, 0.001, "4-refused")]  # slower than any, but refused
    samples += [kernel(2, 8, 0.3, "8-a", SOFTMAX), kernel(2, 8, 0.4, "8-b", SOFTMAX)]  # the suite's 8 is a ReLU now
    suite = {(1, n): RELU for n in range(1, 8)} | {(2, 8): RELU}
    mix = leaderboard_mix(samples, lambda code: "policy_x: no" if "refused" in code else None, 3, 2, suite)
    assert [(p.number, p.sample, p.kernel.model) for p in mix.picks] == [
        (2, 0, "2-0.01"), (2, 1, "2-2.5"), (4, 0, "4-0.01"), (4, 1, "4-2.5"), (6, 0, "6-0.01"), (6, 1, "6-2.5")]
    assert [(s.model, why) for s, why in mix.refused] == [("4-refused", "policy_x: no")]
    assert mix.changed == ((2, 8),)
    three = leaderboard_mix(samples, lambda code: None, 1, 3, suite)
    assert [p.kernel.speedup for p in three.picks] == [0.001, 0.9, 2.5]  # the middle problem's slowest, middle, fastest
    assert {p.number for p in three.picks} == {4}
