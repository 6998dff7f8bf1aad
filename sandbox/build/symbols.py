"""The symbol check: what a built extension imports, read from the file before it is ever loaded.

The text scan (policy/native.py) refuses names in a candidate's C++; a wrapper it does not name still has to
import the library function that does the work. `check_module(path)` lists the module's undefined dynamic
symbols (`nm -D --undefined-only`, demangled by `c++filt`) and refuses every one that is not on the lists of
what kernel extensions import (sandbox/build/symbol_rules.py), and every library it needs (`readelf -d`) that
kernel extensions do not link. It runs wherever a module is about to be loaded
into a runner (sandbox/build/compile.py: built here, built by the service, or found in the cache alike), and
in the build service before an artifact is published, so a refused module is never cached as built.

Reading the file is done by binutils, present wherever a module can be built (the linker is binutils'); looked
up on PATH, else in /usr/bin (a runner that only loads cached modules may run with no compiler on its PATH).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from kevolve.sandbox.build.symbol_rules import needed_refusal, refusal
from pydantic import Field

from kevolve.records import Record

_TIMEOUT_S = 120.0  # nm takes ~0.1 s; on a machine loaded past its cores it has stalled for a minute


class Refused(Record):
    """One imported symbol a kernel extension may not have."""

    symbol: str = Field(description="the symbol, demangled, with its version when it has one (memcpy@GLIBC_2.14)")
    why: str = Field(description="the capability it gives ('files', 'threads' …) or 'not on the allowlist'")


class SymbolCheck(Record):
    """What the symbol check found in one built module."""

    module: str = Field(description="the module's file name")
    imports: int = Field(default=0, description="how many undefined dynamic symbols it has")
    refused: tuple[Refused, ...] = Field(default=(), description="every import the rules refuse, in file order")
    error: str = Field(default="", description="why the module could not be read ('' = it was): refused too")
    infra: bool = Field(default=False, description=(
        "the machine's fault, not the module's: no nm/c++filt here, or they did not answer in time (a loaded machine)"))
    seconds: float = Field(default=0.0, description="wall time of the check")

    @property
    def ok(self) -> bool:
        return not self.refused and not self.error

    def reason(self, extension: str = "") -> str:
        """One line for the verdict: `policy_native: the built extension 'x' imports … (symbol check)`."""
        who = f"the built extension {extension!r}" if extension else f"the built module {self.module}"
        if self.error:
            return f"policy_native: {who} could not be checked: {self.error[:200]} (symbol check)"
        first = self.refused[0]
        more = f" and {len(self.refused) - 1} more refused import(s)" if len(self.refused) > 1 else ""
        shown = first.symbol if len(first.symbol) <= 160 else first.symbol[:157] + "..."
        return f"policy_native: {who} imports {shown} ({first.why}){more} (symbol check of the built module)"


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    fallback = Path("/usr/bin") / name
    return str(fallback) if fallback.is_file() else None


def parse_nm(listing: str) -> list[tuple[str, str]]:
    """(name, version) of each symbol in `nm -D --undefined-only` output (`  U memcpy@GLIBC_2.14`)."""
    found: list[tuple[str, str]] = []
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            name, _, version = parts[-1].partition("@")
            found.append((name, version.lstrip("@")))
    return found


def demangle(names: list[str]) -> dict[str, str]:
    """C++ spelling of each mangled name (`_Z…`) among `names`, by c++filt; ValueError if it fails."""
    mangled = [n for n in names if n.startswith("_Z")]
    cxxfilt = _tool("c++filt")
    if cxxfilt is None:
        raise FileNotFoundError("c++filt (binutils) not found")
    if not mangled:
        return {}
    filt = subprocess.run([cxxfilt], input="\n".join(mangled) + "\n", capture_output=True, text=True, check=False,
                          timeout=_TIMEOUT_S)
    out = filt.stdout.splitlines()
    if filt.returncode != 0 or len(out) != len(mangled):
        raise ValueError("c++filt did not demangle the module's symbols")
    return dict(zip(mangled, out, strict=True))


def refused_imports(listing: str) -> tuple[int, tuple[Refused, ...]]:
    """(how many imports, the refused ones) of a module, from its `nm -D --undefined-only` output."""
    found = parse_nm(listing)
    names = demangle([n for n, _ in found])
    refused = []
    for name, version in found:
        demangled = names.get(name, name)
        why = refusal(name, demangled)
        if why:
            refused.append(Refused(symbol=f"{demangled}@{version}" if version else demangled, why=why))
    return len(found), tuple(refused)


def parse_needed(dynamic: str) -> list[str]:
    """The libraries in `readelf -d` output (`(NEEDED)  Shared library: [libc10.so]`), in order."""
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]\n]+)\]", dynamic)


def _needed(path: Path) -> tuple[Refused, ...]:
    readelf = _tool("readelf")
    if readelf is None:
        raise FileNotFoundError("readelf (binutils) not found")
    got = subprocess.run([readelf, "-d", "-W", str(path)], capture_output=True, text=True, check=False,
                         timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if got.returncode != 0:
        raise ValueError(f"readelf: {(got.stderr.strip().splitlines() or ['failed'])[-1][:200]}")
    return tuple(Refused(symbol=f"NEEDED {lib}", why=why) for lib in parse_needed(got.stdout)
                 if (why := needed_refusal(lib)))


def check_module(path: Path) -> SymbolCheck:
    """Every import of the module at `path` against the rules (symbol_rules.py)."""
    t0 = time.monotonic()
    nm = _tool("nm")
    try:
        if nm is None:
            raise FileNotFoundError("nm (binutils) not found")
        got = subprocess.run([nm, "-D", "--undefined-only", str(path)], capture_output=True, text=True, check=False,
                             timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL)
        if got.returncode != 0:
            raise ValueError(f"nm: {(got.stderr.strip().splitlines() or ['failed'])[-1][:200]}")
        count, refused = refused_imports(got.stdout)
        refused = _needed(path) + refused
    except (FileNotFoundError, subprocess.TimeoutExpired) as e:
        return SymbolCheck(module=path.name, error=f"{type(e).__name__}: {e}", infra=True, seconds=time.monotonic() - t0)
    except (ValueError, OSError) as e:
        return SymbolCheck(module=path.name, error=f"{type(e).__name__}: {e}", seconds=time.monotonic() - t0)
    return SymbolCheck(module=path.name, imports=count, refused=refused, seconds=time.monotonic() - t0)


__all__ = ["Refused", "SymbolCheck", "check_module", "demangle", "parse_needed", "parse_nm", "refused_imports"]
