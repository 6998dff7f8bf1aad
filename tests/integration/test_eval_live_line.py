"""`kevolve eval` on a terminal shows a live line while the judge works: its phase in words, the time so far and,
from the first checked call on, the judge's bound on the time left (issue 37: eval was silent for 20-40 s, then
printed ~30 internal phase names; no ETA). Written to stderr only when stderr is a terminal, so scripts and --json
read what they read before. A real eval process in a real pseudo-terminal, cold (no warm service), against the real
judge and runner: one run, read by the first two tests."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testpaths import BUILD_CACHE, FIXTURES

from kevolve.report import PHASE_WORDS

CMD = [sys.executable, "-m", "kevolve.cli", "eval", str(FIXTURES / "problems" / "relu.py"),
       str(FIXTURES / "solutions" / "relu_cpp.py"), "--device", "cpu", "--trials", "3", "--no-warm"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LIVE = re.compile(r"evaluating: ([^\n(]+?)\s+\((\d+) s(?:, up to (\d+) s left[^)\n]*)?\)")


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp_path), "KEVOLVE_CACHE_DIR": str(BUILD_CACHE), "TERM": "xterm",
            "COLUMNS": "160", "LINES": "40"}


def run_in_a_terminal(tmp_path: Path) -> tuple[int, str]:
    """The eval with stdout and stderr on one pseudo-terminal: (exit code, everything it drew, escapes removed)."""
    leader, follower = pty.openpty()
    p = subprocess.Popen(CMD, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env(tmp_path),
                         close_fds=True)
    os.close(follower)
    out, deadline = b"", time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end closed: the process is done
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(leader)
    return p.wait(timeout=60), ANSI.sub("", out.decode(errors="replace")).replace("\r", "\n")


@pytest.fixture(scope="module")
def terminal(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str]:
    return run_in_a_terminal(tmp_path_factory.mktemp("home"))


def test_a_terminal_sees_the_judges_phases_in_words_and_the_time_so_far(terminal: tuple[int, str]) -> None:
    code, text = terminal
    assert code == 0 and "Traceback" not in text, text[-3000:]
    shown = {m.strip() for m in re.findall(r"evaluating: ([^\n(]+)", text)}
    assert PHASE_WORDS["reference"] in shown, shown  # the longest wait, seconds on the CPU
    assert len(shown & set(PHASE_WORDS.values())) >= 2, shown
    assert re.search(r"evaluating: [^\n]+\(\d+ s[,)]", text), "no time so far in the live line"
    assert re.search(r"^\s*ok\s+ok: ", text, re.M), text[-3000:]  # then the verdict, as without a terminal


def test_the_time_left_is_shown_once_the_judge_can_bound_it_and_goes_down(terminal: tuple[int, str]) -> None:
    """No ETA while the reference is prepared or the candidate built (nothing measures those ahead); one from the
    checks on (their planned calls at the measured seconds a call, the timing's caps), smaller at the end."""
    code, text = terminal
    assert code == 0, text[-3000:]
    drawn = [(words, int(left)) if left else (words, None) for words, _so_far, left in LIVE.findall(text)]
    unknown = (PHASE_WORDS["reference"], PHASE_WORDS["compile"], "starting the judge")
    assert drawn and {w for w, _ in drawn} & set(unknown), text[-3000:]
    assert [(w, n) for w, n in drawn if w in unknown and n is not None] == []
    etas = [(w, n) for w, n in drawn if n is not None]
    assert {w for w, _ in etas} >= {PHASE_WORDS["correctness"], PHASE_WORDS["timing"]}, drawn
    # the bound shrinks as the judge gets through the phases; the line shows whole seconds rounded up, so a bound
    # under a second from the start (fast calls: CI's 2 cores drew 'up to 1 s' throughout) can only stay at 1
    # (tests/unit/test_eta.py checks the bound itself going down)
    assert etas[-1][1] < etas[0][1] or etas[0][1] == etas[-1][1] == 1, etas


def test_no_live_line_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    r = subprocess.run(CMD, capture_output=True, text=True, timeout=300, env=env(tmp_path))
    assert r.returncode == 0 and "evaluating:" not in r.stdout + r.stderr, r.stderr[-2000:]
