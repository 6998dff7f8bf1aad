"""Every `kevolve …` command in README.md and docs/ names a subcommand that exists and only flags it takes, and
every script or fixture path they name is in the repository (issue 37: "every doc command runs"; docs/bench.md had
named a script that does not exist). A parse of each command against the real CLI, not a run: the runs are
tests/integration/test_doc_commands_run.py's (each one that can run on a CPU, the others listed with why not) and the
first-hour script's (scripts/ci_first_hour.py). docs/BENCHMARKS.md is a record of measurements: its commands are
checked too, its paths are not (it names tests and files as they were)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main

from kevolve.cli import app

ROOT = Path(__file__).parent.parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ROOT_OPTIONS = {"--config": 1, "--help": 0}  # the root callback's options, and how many values each takes


def doc_commands(text: str) -> list[str]:
    """`kevolve …` in fenced shell blocks (a line each, continuations joined, chains split) and in inline code."""
    found = []
    for block in re.findall(r"```(?:bash|sh|console)?\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line.strip().removeprefix("$ ")):
                found.append(part)
    found += re.findall(r"`(kevolve [^`]+)`", text)
    return [re.sub(r"\s+#.*$", "", c).strip() for c in found if c.startswith("kevolve ")]


def check(command: str) -> str | None:
    """Why the command would not parse (an unknown subcommand or flag), or None."""
    cmd = typer.main.get_command(app)
    tokens = shlex.split(command.replace("[", " ").replace("]", " ").replace("{", "").replace("}", ""))[1:]
    while tokens and tokens[0] in ROOT_OPTIONS:
        tokens = tokens[1 + ROOT_OPTIONS[tokens[0]]:]
    while tokens and hasattr(cmd, "commands") and tokens[0] in cmd.commands:
        cmd, tokens = cmd.commands[tokens[0]], tokens[1:]
    takes_arguments = any(p.param_type_name == "argument" for p in cmd.params)
    if hasattr(cmd, "commands") and tokens and not tokens[0].startswith("-") and tokens[0] != "…" \
            and not takes_arguments:
        return f"{cmd.name or 'kevolve'} has no command {tokens[0]!r}"
    flags = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    unknown = [t.split("=")[0] for t in tokens if re.match(r"^--?[A-Za-z]", t) and t.split("=")[0] not in flags]
    return f"{cmd.name} takes no {', '.join(unknown)}" if unknown else None


CASES = [(d.relative_to(ROOT).as_posix(), c) for d in DOCS for c in doc_commands(d.read_text())]


def test_the_docs_name_commands() -> None:
    assert len(CASES) > 60 and {d for d, _ in CASES} >= {"README.md", "docs/optimize.md", "docs/bench.md",
                                                       "docs/ARCHIVE.md"}


@pytest.mark.parametrize(("doc", "command"), CASES, ids=[f"{d}:{i}" for i, (d, _) in enumerate(CASES)])
def test_each_documented_command_parses_against_the_real_cli(doc: str, command: str) -> None:
    assert check(command) is None, f"{doc}: `{command}`: {check(command)}"


def test_a_mistyped_flag_or_subcommand_is_caught() -> None:
    """The check itself: what it must refuse."""
    assert check("kevolve optimize x.py --max-candidate 3") == "optimize takes no --max-candidate"
    assert check("kevolve archive serach relu") == "archive has no command 'serach'"
    assert check("kevolve evaluate p.py s.py") == "kevolve has no command 'evaluate'"
    assert check("kevolve --config k.toml eval p.py s.py --device cpu --json") is None
    assert check("kevolve bench --suite DIR --level 1 --solutions DIR --executor ray [--address HOST:6379]") is None


@pytest.mark.parametrize("doc", [d for d in DOCS if d.name != "BENCHMARKS.md"], ids=lambda d: d.name)
def test_every_script_and_fixture_a_doc_names_exists(doc: Path) -> None:
    text = doc.read_text()
    named = set(re.findall(r"(?<![\w/.])((?:scripts|tests)/[\w./-]+\.(?:py|sh|md|jsonl))", text))
    # another repository's script, named as such (KernelBench's own generate_samples.py)
    named -= {n for n in named if re.search(re.escape(n) + r"`?,? in its repository", text)}
    assert [n for n in sorted(named) if not (ROOT / n).exists()] == []
