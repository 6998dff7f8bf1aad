"""Real LLM-written kernels from the KernelBench leaderboard's public repository, as replay samples (and as a
candidate set chosen by a fixed rule, `leaderboard_mix`).

The leaderboard (github.com/anneouyang/KernelBenchLeaderboard) publishes, per KernelBench problem, the
kernels that claude-3.5-sonnet, gpt-4o, o1, deepseek-coder, llama-3.1, gemini-1.5 wrote and that passed
KernelBench's own check on its GPU, in `docs/assets/raw_data.json` (level, problem_id, model, code,
speedups), the problems in `docs/assets/problems/l{L}_p{N}.py` and the problems' names in
`docs/assets/data.json` ('Level 1: 19_ReLU'). raw_data's `problem_id` counts from 0: problem N of a
level (file `l1_p19.py`, KernelBench's `19_ReLU.py`) has problem_id N-1 (every one of the 383 kernels
data.json lists under a name says so). It keeps the extracted code, not the raw replies. Read from a checkout, a bare
git directory, or a base URL; nothing of it is committed here.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pydantic import Field

from kevolve.agent.llm.replay import CorpusError, ReplaySample, problem_keys
from kevolve.records import Record

RAW = "docs/assets/raw_data.json"
NAMES = "docs/assets/data.json"
ORIGIN = "anneouyang/KernelBenchLeaderboard"


class Source:
    """Files of the leaderboard repository: a checkout, a git directory (HEAD), or an http(s) base URL."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.url = where.startswith(("http://", "https://"))
        path = Path(where)
        self.git_dir = not self.url and (path / "HEAD").is_file() and (path / "objects").is_dir()
        if not self.url and not path.is_dir():
            raise CorpusError(f"--source {where}: no such folder (a checkout or git directory of {ORIGIN}, or a URL)")

    def read(self, rel: str) -> str | None:
        """The file's text, or None when the source has no such file."""
        if self.url:
            try:
                with urllib.request.urlopen(f"{self.where.rstrip('/')}/{rel}", timeout=60) as r:  # noqa: S310
                    return r.read().decode()
            except OSError:
                return None
        if self.git_dir:
            r = subprocess.run(["git", "--git-dir", self.where, "show", f"HEAD:{rel}"], capture_output=True, text=True)
            return r.stdout if r.returncode == 0 else None
        p = Path(self.where) / rel
        return p.read_text() if p.is_file() else None


def _names(source: Source) -> dict[tuple[int, int], str]:
    """(level, number) -> the problem's name ('19_ReLU'), from data.json's 'Level 1: 19_ReLU' keys."""
    text = source.read(NAMES)
    out = {}
    for key in json.loads(text) if text is not None else {}:
        head, _, name = key.partition(":")
        number = name.strip().split("_", 1)[0]
        if head.strip().lower().startswith("level") and number.isdigit():
            out[(int(head.split()[-1]), int(number))] = name.strip()
    return out


def leaderboard_samples(source: Source, levels: tuple[int, ...] = (1, 2),
                        max_per_problem: int | None = None) -> Iterator[ReplaySample]:
    """Every kernel of the chosen levels with its problem's source, in the file's order per problem."""
    raw = source.read(RAW)
    if raw is None:
        raise CorpusError(f"{source.where}: no {RAW} (is this {ORIGIN}?)")
    try:
        rows = json.loads(raw)
    except ValueError as e:
        raise CorpusError(f"{source.where}/{RAW}: not JSON ({e})") from None
    names, problems, taken = _names(source), {}, {}
    for row in rows:
        level, number = int(row["level"]), int(row["problem_id"]) + 1
        if level not in levels or not row.get("code"):
            continue
        key = (level, number)
        if key not in problems:
            problems[key] = source.read(f"docs/assets/problems/l{level}_p{number}.py")
        if problems[key] is None or (max_per_problem is not None and taken.get(key, 0) >= max_per_problem):
            continue
        taken[key] = taken.get(key, 0) + 1
        name = names.get(key, str(number))
        yield ReplaySample(problem=f"level{level}/{name}", problem_source=problems[key],
                           model=str(row.get("display_name") or row.get("model")), code=row["code"],
                           speedup=row.get("torch_speedup"), origin=f"{ORIGIN}:{RAW}#{row.get('file')}")


def problem_key(sample: ReplaySample) -> tuple[int, int]:
    """(level, number) of a leaderboard sample: 'level2/9_Matmul_…' -> (2, 9)."""
    level, _, name = sample.problem.partition("/")
    return int(level.removeprefix("level")), int(name.split("_", 1)[0])


class MixPick(Record):
    """One candidate of a leaderboard mix (scripts/make_leaderboard_mix.py): a kernel and its place in the set."""

    level: int
    number: int
    sample: int = Field(description="its number in the set, in the leaderboard's speed order: 0 is the slowest")
    kernel: ReplaySample


def _spread(n: int, k: int) -> list[int]:
    """k indices spread evenly over range(n), the middle of each of k equal slices."""
    return sorted({int((i + 0.5) * n / k) for i in range(min(k, n))})


def _ends(m: int, p: int) -> list[int]:
    """p indices over range(m) from the first to the last, evenly (p=2: the two ends)."""
    return [0] if p == 1 or m == 1 else sorted({round(j * (m - 1) / (p - 1)) for j in range(min(p, m))})


class Mix(Record):
    """A leaderboard mix: the candidates, and what the rule left out and why."""

    picks: tuple[MixPick, ...]
    refused: tuple[tuple[ReplaySample, str], ...] = Field(description="kernels the policy refused, with its reason")
    changed: tuple[tuple[int, int], ...] = Field(
        description="(level, number) of problems whose Model class the suite changed since the leaderboard's file")


def leaderboard_mix(samples: Iterable[ReplaySample], refusal: Callable[[str], str | None], per_level: int,
                    per_problem: int, suite: dict[tuple[int, int], str]) -> Mix:
    """A candidate set from the leaderboard by a fixed rule.

    Kernels `refusal` names a reason for are left out; a kernel whose code another kernel of the same problem already
    has is kept once. A problem is eligible when `suite` (level, number -> the suite's problem source) has it with the
    `Model` class the kernels were written for (docstrings aside; sizes may differ: KernelBench changed them, and
    renumbered a few problems) and at least `per_problem` kernels are left; of each level's eligible problems,
    `per_level` spread evenly over their numbers are taken; of each, `per_problem` kernels spread over the
    leaderboard's reported speedup from the slowest to the fastest (2: the slowest and the fastest), numbered so.
    """
    kept: dict[tuple[int, int], list[ReplaySample]] = {}
    refused: list[tuple[ReplaySample, str]] = []
    for s in samples:
        if (why := refusal(s.code)) is not None:
            refused.append((s, why))
        elif all(s.code != o.code for o in kept.setdefault(problem_key(s), [])):
            kept[problem_key(s)].append(s)
    changed = sorted(k for k, v in kept.items()
                     if k in suite and problem_keys(suite[k])[1] != problem_keys(v[0].problem_source)[1])
    eligible = sorted(k for k, v in kept.items() if k in suite and k not in changed and len(v) >= per_problem)
    picks = []
    for level in sorted({lv for lv, _ in eligible}):
        numbers = [n for lv, n in eligible if lv == level]
        for n in (numbers[i] for i in _spread(len(numbers), per_level)):
            ranked = sorted(kept[(level, n)], key=lambda s: (s.speedup is None, s.speedup or 0.0))  # stable: file order
            picks += [MixPick(level=level, number=n, sample=j, kernel=ranked[i])
                      for j, i in enumerate(_ends(len(ranked), per_problem))]
    return Mix(picks=tuple(picks), refused=tuple(refused), changed=tuple(changed))


__all__ = ["Mix", "MixPick", "Source", "leaderboard_mix", "leaderboard_samples", "problem_key"]
