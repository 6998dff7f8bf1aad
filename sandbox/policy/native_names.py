"""C++ names as the compiler resolves them, for the native rules (policy_native): namespace aliases
(`namespace q = pybind11;`, `#define S std`) spelled out, and the unqualified names a
`using namespace X;` directive makes reachable. Rules that match `pybind11::getattr` or `std::thread`
would otherwise see neither `q::getattr` nor `thread t(...)`."""

from __future__ import annotations

import re

_PATH = r"((?:::\s*)?\w+(?:\s*::\s*\w+)*)"
# (pattern, alias group, target group): namespace aliases, type aliases and object-like macros.
_ALIASES = ((re.compile(r"\bnamespace\s+(\w+)\s*=\s*" + _PATH + r"\s*;"), 1, 2),
            (re.compile(r"\busing\s+(\w+)\s*=\s*(?:typename\s+)?" + _PATH + r"\s*;"), 1, 2),
            (re.compile(r"\btypedef\s+(?:typename\s+)?" + _PATH + r"\s+(\w+)\s*;"), 2, 1),
            (re.compile(r"#\s*define\s+(\w+)[ \t]+" + _PATH + r"[ \t]*$", re.M), 1, 2))
_USING = re.compile(r"\busing\s+namespace\s+" + _PATH + r"\s*;")
_BARE = r"(?<![\w:.>])"
# Names the rules match qualified, to which `using namespace X;` gives unqualified access.
_UNQUALIFIED = {"pybind11": _BARE + r"(?:module_|globals|eval\w*|exec|getattr|setattr|hasattr|delattr|capsule)\s*"
                                    r"(?:::|\()",
                "std": _BARE + r"(?:thread|async)\b\s*[\w({<]", "torch": _BARE + r"manual_seed\b",
                "at": _BARE + r"manual_seed\b", "c10": _BARE + r"Dispatcher\b"}


def _head(path: str) -> str:
    return path.split("::")[0]


def normalised(code: str) -> str:
    """The code with aliases (`namespace q = pybind11;`, `using M = pybind11::module_;`, `#define S std`)
    spelled out, line for line, so that every rule about a qualified name sees the real one."""
    aliases: dict[str, str] = {}
    for pattern, name, target in _ALIASES:
        for m in pattern.finditer(code):
            aliases[m.group(name)] = re.sub(r"\s+", "", m.group(target)).lstrip(":")
    for _ in range(4):  # aliases of aliases
        aliases = {a: aliases.get(_head(t), _head(t)) + t[len(_head(t)):] for a, t in aliases.items()}
    aliases = {a: t for a, t in aliases.items() if a != t}
    if not aliases:
        return code
    pattern = re.compile(r"(?<![\w:])(" + "|".join(map(re.escape, aliases)) + r")(\s*::)")
    return pattern.sub(lambda m: aliases[m.group(1)] + m.group(2), code)


def using_hits(code: str, line) -> list[tuple[int, str]]:  # noqa: ANN001
    """Unqualified uses of dangerous names after `using namespace pybind11/std/at …;`."""
    hits = []
    for u in _USING.finditer(code):
        ns = re.sub(r"\s+", "", u.group(1)).lstrip(":").split("::")[0]
        ns = "pybind11" if ns == "py" else ns
        if ns in _UNQUALIFIED:
            hits += [(line(m.start()), f"{ns} name used through using namespace ({m.group(0).strip()[:40]})")
                     for m in re.finditer(_UNQUALIFIED[ns], code)]
    return hits
