"""The gate's shared words (common/gate.py): two mappings of one file see each other's writes; a wait ends on its
word, on ABORT, or when asked to stop."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from kevolve.sandbox.common.gate import ABORT, DONE, GO, Words


def test_two_mappings_of_the_gate_see_each_others_words(tmp_path: Path) -> None:
    judge = Words(tmp_path)
    runner = Words(tmp_path, judge.name)
    judge.hide()
    assert not (tmp_path / judge.name).exists()  # mapped: no name left to open it by
    runner.w[DONE] = 3
    assert judge.w[DONE] == 3
    threading.Timer(0.01, lambda: judge.w.__setitem__(GO, 2)).start()
    assert runner.wait(GO, 2)
    judge.reset()
    assert (runner.w[DONE], runner.w[GO], runner.w[ABORT]) == (0, 0, 0)


def test_a_wait_ends_on_abort_or_when_told_to_stop(tmp_path: Path) -> None:
    w = Words(tmp_path)
    threading.Timer(0.01, lambda: w.w.__setitem__(ABORT, 1)).start()
    assert not w.wait(GO, 1)
    w.reset()
    t0 = time.monotonic()
    assert not w.wait(DONE, 1, stop=lambda: time.monotonic() - t0 > 0.02)
    assert w.wait(DONE, 0)


def test_a_gate_file_of_another_name_or_folder_is_refused(tmp_path: Path) -> None:
    import pytest

    for name in ("../x", "gate-none"):
        with pytest.raises(ValueError):
            Words(tmp_path, name)
