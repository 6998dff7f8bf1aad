"""Pull the candidate's Python source out of an LLM reply.

Replies put code in one or several fenced blocks, with prose around them, and are sometimes cut
off mid-block. We take the last block that parses and defines ModelNew; a cut-off block that no
longer parses is reported as truncated rather than handed to the compiler. Fences as models write
them: three or more backticks or tildes (a longer fence around code whose docstrings hold ```),
indented inside a list item, labelled python / py / triton / none, with a file name after the label.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from kevolve.contract import defines_model_new
from kevolve.languages import LANGUAGES
from kevolve.contract import parse_python

_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+.-]*)[^\n]*\n(?P<body>.*?)"
                    r"(?:(?P<close>^[ \t]*(?P=fence)[ \t]*$)|\Z)", re.S | re.M)
# A Python DSL's kernels are Python: some models label the file with the kernel language (languages.py).
_PY_LANGS = {"", "python", "py", "python3", *(t for lang in LANGUAGES.values() for t in lang.fence_tags)}


@dataclass(frozen=True)
class Extraction:
    """The source (None if no usable code) and, when None, why."""

    source: str | None
    reason: str = ""


def _parses(src: str) -> bool:
    try:
        parse_python(src)
    except (SyntaxError, ValueError):
        return False
    return True


_CLASS_DEF = re.compile(r"^\s*class\s+ModelNew\b", re.M)


def extract_code(text: str) -> Extraction:
    """The last fenced Python block that parses and defines ModelNew (or the bare reply if it does)."""
    blocks = [(m.group("lang").lower(), textwrap.dedent(m.group("body")), m.group("close") is not None)
              for m in _FENCE.finditer(text)]
    py = [(body, closed) for lang, body, closed in blocks if lang in _PY_LANGS]
    good = [body for body, _ in py if defines_model_new(body) and _parses(body)]
    if good:
        # a usage snippet after the solution ("from model_new import ModelNew") binds the name too:
        # the last block that defines the class wins over it
        classes = [body for body in good if _CLASS_DEF.search(body)]
        return Extraction((classes or good)[-1].strip() + "\n")
    if not blocks and defines_model_new(text) and _parses(text):
        return Extraction(text.strip() + "\n")
    if any(defines_model_new(body) for body, _ in py):
        cut = any(not closed for body, closed in py if defines_model_new(body))
        return Extraction(None, "truncated: the reply's code block ends mid-source" if cut
                          else "syntax_error: the code block defining ModelNew does not parse")
    if blocks or "class ModelNew" in text:
        return Extraction(None, "no_model_new: no code block defines class ModelNew")
    return Extraction(None, "no_code: the reply has no code block")
