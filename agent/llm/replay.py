"""Replay real LLM-written kernels: a corpus of (problem, kernel) pairs, and the book that picks one per request.

The corpus is one JSONL file (`corpus.jsonl`), written by `write_corpus` — from a public source by
`scripts/fetch_replay_corpus.py`, or by a test. A request names its problem by the module source in the
prompt (`## The module` block): the book matches it to a corpus problem by the normalized source, or,
when the sizes differ (KernelBench changed shapes between releases), by the `Model` class alone.

Each request of a problem gets the problem's next sample in a fixed rotation, whatever the operator:
a repair is answered with another real kernel, not a fix of the failed one. A sample with `reply` is
replayed verbatim; one with only `code` (sources that publish extracted kernels, like the KernelBench
leaderboard) is wrapped in prose and a fence in one of the shapes models use, chosen by its position,
so the extraction path is exercised too.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import re
import threading
from collections.abc import Iterable
from pathlib import Path

from pydantic import Field

from kevolve.records import Record
from kevolve.contract import parse_python

log = logging.getLogger(__name__)

CORPUS_FILE = "corpus.jsonl"
_MODULE = re.compile(r"^## The module\n```python\n(.*?)\n```", re.S | re.M)
_TASK = re.compile(r"^Task: (\w+)", re.M)


class ReplaySample(Record):
    """One real kernel for one problem."""

    problem: str = Field(description="the problem's name in its suite, e.g. 'level1/19_ReLU'")
    problem_source: str = Field(description="the reference module the kernel was written for")
    model: str = Field(description="the LLM that wrote it")
    code: str = Field(default="", description="the extracted source (used when there is no reply)")
    reply: str = Field(default="", description="the raw reply, prose and fences included, when the source kept it")
    speedup: float | None = Field(default=None, description="what the source measured for it, if anything")
    origin: str = Field(default="", description="where the sample came from (repository, file)")


class CorpusError(ValueError):
    """The corpus is missing or unreadable (one-line message)."""


def write_corpus(folder: Path, samples: Iterable[ReplaySample]) -> Path:
    """Write `folder/corpus.jsonl` (replacing it) and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CORPUS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(s.model_dump_json() + "\n" for s in samples))
    tmp.replace(path)
    return path


def read_corpus(folder: Path) -> list[ReplaySample]:
    """The samples of `folder/corpus.jsonl`; CorpusError when it is missing or a line is not a sample."""
    path = folder / CORPUS_FILE if folder.is_dir() else folder
    if not path.is_file():
        raise CorpusError(f"{path}: no replay corpus (build one with scripts/fetch_replay_corpus.py)")
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(ReplaySample.model_validate_json(line))
            except ValueError as e:
                raise CorpusError(f"{path}:{i}: not a replay sample ({str(e).splitlines()[0]})") from None
    return out


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return tree


def problem_keys(source: str) -> tuple[str, str]:
    """(whole-module key, `Model`-class key): hashes of the AST without docstrings or comments."""
    try:
        tree = _strip_docstrings(parse_python(source))
    except (SyntaxError, ValueError):
        digest = hashlib.sha256(source.strip().encode()).hexdigest()
        return digest, digest
    model = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]  # type: ignore[attr-defined]
    whole = hashlib.sha256(ast.dump(tree).encode()).hexdigest()
    cls = hashlib.sha256(ast.dump(model[0]).encode()).hexdigest() if model else whole
    return whole, cls


def _wrap(sample: ReplaySample, position: int) -> str:
    """The sample as a reply: verbatim when the source kept the reply, else code in one of four shapes."""
    if sample.reply:
        return sample.reply
    code = sample.code.strip()
    shapes = (
        f"I'll replace the operator with a custom kernel.\n\n```python\n{code}\n```\n\n"
        "The kernel avoids the extra passes PyTorch makes, so it should be faster.",
        f"```python\n{code}\n```",
        f"Here is the optimized implementation:\n\n```py\n{code}\n```\nNotes:\n1. Same inputs and outputs as Model.\n"
        "2. Launch configuration chosen for large tensors.",
        f"Let me think about the memory access pattern first. Each thread handles one element.\n\n"
        f"```\n{code}\n```\n",
    )
    return shapes[position % len(shapes)]


class ReplayBook:
    """Answers prompts with the corpus's kernels, each problem's samples in rotation. Thread-safe."""

    def __init__(self, samples: list[ReplaySample]) -> None:
        self._by_whole: dict[str, list[ReplaySample]] = {}
        self._by_class: dict[str, list[ReplaySample]] = {}
        for s in samples:
            whole, cls = problem_keys(s.problem_source)
            self._by_whole.setdefault(whole, []).append(s)
            self._by_class.setdefault(cls, []).append(s)
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()
        self.served: list[tuple[str, str, str]] = []
        """(operator, problem, model) of every reply that carried a kernel."""
        self.unmatched = 0
        """Requests whose module matched no corpus problem."""

    def samples_for(self, module_source: str) -> list[ReplaySample]:
        """The corpus's samples for this module: same source, else same `Model` class (sizes may differ)."""
        whole, cls = problem_keys(module_source)
        return self._by_whole.get(whole) or self._by_class.get(cls) or []

    def answer(self, prompt: str) -> str:
        """The reply to one prompt: the next real kernel of its problem, or prose without code."""
        task = _TASK.search(prompt)
        module = _MODULE.search(prompt)
        found = self.samples_for(module.group(1)) if module else []
        if not found:
            with self._lock:
                self.unmatched += 1
            log.warning("replay: no corpus problem matches the request's module")
            return "I'm not able to write a kernel for this module right now."
        key = problem_keys(found[0].problem_source)[1]
        with self._lock:
            i = self._next.get(key, 0)
            self._next[key] = i + 1
            sample = found[i % len(found)]
            self.served.append((task.group(1) if task else "?", sample.problem, sample.model))
        return _wrap(sample, i)


__all__ = ["CORPUS_FILE", "CorpusError", "ReplayBook", "ReplaySample", "problem_keys", "read_corpus",
           "write_corpus"]
