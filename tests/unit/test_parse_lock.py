"""Every parse of Python source in kevolve goes through `kevolve.contract.parse_python`.

CPython 3.11.7 (this machine's) corrupts the AST constructor's recursion counter when threads parse at
once (gh-106905): a replayed `optimize` run, whose proposals are extracted in parallel threads, died
with "SystemError: AST constructor recursion depth mismatch". One lock around one parse function fixes
it only if nothing parses beside it.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kevolve", "agent", "sandbox", "kernelbench", "archive")


def test_no_module_calls_ast_parse_directly() -> None:
    raw = []
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            if f == ROOT / "kevolve" / "contract.py":
                continue
            for i, line in enumerate(f.read_text().splitlines(), 1):
                if re.search(r"\bast\.parse\(", line):
                    raw.append(f"{f.relative_to(ROOT)}:{i}")
    assert not raw, f"parse through kevolve.contract.parse_python instead: {raw}"


def test_parse_python_parses_like_ast_parse() -> None:
    import ast

    from kevolve.contract import parse_python

    src = "class ModelNew:\n    def forward(self, x):\n        return x\n"
    assert ast.dump(parse_python(src)) == ast.dump(ast.parse(src))
    assert isinstance(parse_python("x + 1", mode="eval"), ast.Expression)
