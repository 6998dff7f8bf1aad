"""Where a large problem's draws live (sandbox/judge/residency.py): made again on the device when used where that is
cheap and gives the same bits, else host copies. KEVOLVE_RESIDENCY sends a small problem down those paths on the CPU
(the judge's own switch; the real case is KernelBench L1 19's 6.4 GB ReLU, whose eight pinned copies took 26 s)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kevolve.contract import load_problem
from kevolve.sandbox.common import harness as h
from kevolve.sandbox.judge import oracle
from kevolve.sandbox.judge.checks import fingerprint

PROBLEMS = Path(__file__).parent.parent / "fixtures" / "problems"
CPU = torch.device("cpu")


def _prepare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str | None, problem: Path = PROBLEMS / "softmax.py"):
    if mode is None:
        monkeypatch.delenv("KEVOLVE_RESIDENCY", raising=False)
    else:
        monkeypatch.setenv("KEVOLVE_RESIDENCY", mode)
    tmp_path.mkdir(parents=True, exist_ok=True)
    return oracle.prepare(load_problem(problem), 3, 5, CPU, tmp_path, memory_limit=None)


def test_a_problem_off_the_device_keeps_shapes_and_prints_and_makes_each_draw_again_bit_for_bit(tmp_path, monkeypatch) -> None:  # noqa: ANN001, E501
    kept = _prepare(tmp_path / "a", monkeypatch, None)
    made = _prepare(tmp_path / "b", monkeypatch, "host")
    assert kept.residency == "device" and made.residency == "regenerated"
    # two plain, one shifted (as host copies would be) and every never-seen draw: they cost nothing kept (red team 6)
    assert list(made.draws) == ["d0", "d1", "negate", "f0", "f1", "f2"]
    for key, d in made.draws.items():
        assert d.remake is not None and all(t.device.type == "meta" for t in d.inputs + d.truth), key
        x, truth = made.inputs_of(key), made.truth_of(key)
        assert all(t.device.type == "cpu" for t in x + truth)
        assert fingerprint(truth) == made.truth_prints(CPU)[key] and fingerprint(x) == d.input_print
        if key in kept.draws and not key.startswith("f"):  # the same seeds: the same values as the kept draws
            assert all(torch.equal(a, b) for a, b in zip(x, kept.draws[key].inputs, strict=True))
            assert all(torch.equal(a, b) for a, b in zip(truth, kept.draws[key].truth, strict=True))
            assert d.report.eager_err == kept.draws[key].report.eager_err
    def no_eager(*_a):  # noqa: ANN002, ANN202 - the float64 forward makes a floating truth on its own
        raise AssertionError("eager's forward run to make a truth again")

    made.draws["d1"].remake.model = no_eager
    assert torch.equal(made.truth_of("d1")[0], kept.draws["d1"].truth[0])
    assert made.phase_s["reference_truth_remake"] > 0 and made.min_bytes == kept.min_bytes
    assert made.call_bytes() == kept.call_bytes()


def test_pinned_keeps_host_copies(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    state = _prepare(tmp_path, monkeypatch, "pinned")
    assert state.residency == "host"
    assert all(d.remake is None and all(t.device.type == "cpu" for t in d.inputs + d.truth) for d in state.draws.values())


def test_a_get_inputs_the_seed_does_not_fix_keeps_host_copies(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    src = (PROBLEMS / "relu.py").read_text()
    assert "def get_inputs" in src
    p = tmp_path / "numpy_inputs.py"  # NumPy's own generator: drawn again, other values
    p.write_text(src.replace("def get_inputs", "def _torch_inputs") + (
        "\n\nimport numpy as _np\n\n\ndef get_inputs():\n    x = _torch_inputs()[0]\n"
        "    return [x + torch.from_numpy(_np.random.rand(*x.shape).astype('float32'))]\n"))
    state = _prepare(tmp_path / "s", monkeypatch, "host", p)
    assert state.residency == "host" and all(d.remake is None for d in state.draws.values())


def test_slots_fill_made_draws_and_tell_a_changed_input_by_its_print(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from kevolve.sandbox.judge.slots import Slots
    from kevolve.sandbox.judge.truths import DeviceTruths

    state = _prepare(tmp_path / "p", monkeypatch, "host")
    made: list[str] = []
    real = state.inputs_of
    monkeypatch.setattr(state, "inputs_of", lambda k: made.append(k) or real(k))
    slots = Slots(state.pristine(), False, tmp_path, CPU, hidden=state.keys("fresh"))
    assert len(slots.slots) == 2 and made == ["d0", "d1"]  # each filled once: shapes came from the kept meta
    i = slots.slot_for("negate")
    assert torch.equal(slots.slots[i].values[0], real("negate")[0]) and made[-1] == "negate"
    n = len(made)
    assert slots.changed(i) is None and len(made) == n  # decided by the fingerprint: nothing made again
    slots.slots[i].values[0][0, 0] += 1.0  # a call wrote into its input
    assert slots.changed(i) == 0
    assert slots.refill(i, "negate") and slots.changed(i) is None
    # red team 6 (a03): two words swapped, both at a multiple of 7 (or both not), and +d / -d on two words, keep the
    # plain fingerprint's sums; the judge's keyed print sees both
    x = slots.slots[i].values[0].view(-1)
    before = fingerprint([x])
    x[0], x[7] = x[7].clone(), x[0].clone()
    assert fingerprint([x]) == before and slots.changed(i) == 0
    assert slots.refill(i, "negate") and slots.changed(i) is None
    w = x.view(torch.int32)
    w[1] += 3
    w[2] -= 3
    assert fingerprint([x]) == before and slots.changed(i) == 0
    assert slots.refill(i, "negate") and slots.changed(i) is None
    slots.free()
    truths = DeviceTruths(state, CPU)
    assert torch.equal(truths.get("d0")[0], state.truth_of("d0")[0]) and list(truths.cache) == ["d0"]
    assert torch.equal(truths.get("f0")[0], state.truth_of("f0")[0]) and "f0" not in truths.cache  # not in the pool


def test_a_draw_that_comes_out_otherwise_when_made_again_is_a_problem_error(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    state = _prepare(tmp_path, monkeypatch, "host")
    d = state.draws["d1"]
    monkeypatch.setattr(d.remake, "inputs", lambda draw: [t + 1 for t in h.draw_inputs(state.module, draw, CPU)])
    with pytest.raises(h.StageError) as e:
        state.inputs_of("d1")
    assert e.value.status == "problem_error" and "other values when draw d1 was made again" in e.value.reason


def test_a_draw_is_made_again_only_where_the_device_has_room_for_it_beside_the_session(monkeypatch) -> None:  # noqa: ANN001
    """KernelBench L1 19 (6.4 GB in, 6.4 GB out): 90 GB with the session's slots and truths and one remaking; an
    H200 (143 GB) makes its draws again, an H100 (80 GB) keeps host copies as before. Weights, a forward that varies
    and a slow one keep host copies too."""
    from kevolve.sandbox.judge import residency

    gb = 6_442_450_944
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10 * 2**30, 143_771 * 2**20))
    assert residency.eligible(torch.nn.Identity(), False, 0.9, gb, gb, cuda)
    assert not residency.eligible(torch.nn.Identity(), True, 0.9, gb, gb, cuda)  # varies
    assert not residency.eligible(torch.nn.Identity(), False, 2.5, gb, gb, cuda)  # slow to make again
    assert not residency.eligible(torch.nn.Linear(16384, 16384), False, 0.9, gb, gb, cuda)  # 1 GiB of weights
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10 * 2**30, 81_559 * 2**20))
    assert not residency.eligible(torch.nn.Identity(), False, 0.9, gb, gb, cuda)
    assert residency.eligible(torch.nn.Identity(), False, 0.9, gb // 2, gb // 2, cuda)
    assert residency.eligible(torch.nn.Identity(), False, 0.9, gb, gb, CPU)  # host memory: no device to share
