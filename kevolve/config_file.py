"""`kevolve.toml`: defaults for `optimize` and `bench` (and `eval`), read once at the entry point; flags override.

    [optimize]
    llm = "anthropic:claude-sonnet-4-6"
    max-candidates = 24
    device = "cuda"

    [bench]
    device = "cuda"
    trials = 20

A table per command, its keys the command's flag names (`max-candidates` or `max_candidates`). The file is
`--config PATH`, else `./kevolve.toml` where it exists. An unknown table or key, or a value of the wrong type,
is one error line naming it (a typo must not be a silently ignored setting). Paths are read as the flags'
are: relative to the folder kevolve runs in.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

DEFAULT = Path("kevolve.toml")
COMMANDS = ("optimize", "bench", "eval")


class ConfigError(ValueError):
    """The config file cannot be used: the message is one line for the user."""


def default_map(path: Path | None, ctx: Any) -> dict[str, dict[str, Any]] | None:
    """Click defaults per command from `path` (or ./kevolve.toml if present; None when there is no file), for
    the root command of `ctx` (Typer's own click, so typed loosely)."""
    if path is None:
        if not DEFAULT.is_file():
            return None
        path = DEFAULT
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {path} cannot be read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path} is not valid TOML: {e}") from None
    out: dict[str, dict[str, Any]] = {}
    for name, table in data.items():
        if name not in COMMANDS or not isinstance(table, dict):
            raise ConfigError(f"config file {path}: [{name}] is not a table kevolve reads (use "
                              f"{', '.join(f'[{c}]' for c in COMMANDS)})")
        out[name] = _table(path, name, table, ctx.command.commands[name], ctx)
    return out


def _table(path: Path, name: str, table: dict[str, Any], cmd: Any, ctx: Any) -> dict[str, Any]:
    options = {p.name: p for p in cmd.params if getattr(p, "param_type_name", "") == "option"}
    flags = {o.lstrip("-").replace("-", "_"): p.name for p in options.values() for o in p.opts if o.startswith("--")}
    values: dict[str, Any] = {}
    for key, value in table.items():
        param = flags.get(key.replace("-", "_"))
        if param is None:
            near = ", ".join(sorted(k.replace("_", "-") for k in flags)[:60])
            raise ConfigError(f"config file {path}: [{name}] has no setting '{key}' (settings: {near})")
        try:
            options[param].process_value(ctx, value)
        except Exception as e:  # noqa: BLE001 - click's BadParameter (Typer's vendored click): the value's type
            why = getattr(e, "message", None) or str(e)
            raise ConfigError(f"config file {path}: [{name}] {key} = {value!r}: {why}") from None
        values[param] = value
    return values


__all__ = ["COMMANDS", "DEFAULT", "ConfigError", "default_map"]
