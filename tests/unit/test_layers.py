"""Which packages may import which: the file contract sits on the ground floor (kevolve.contract)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kevolve.agent
import kevolve.offline
import kevolve.sandbox


def _imported_modules(path: Path) -> set[str]:
    mods: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            mods |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mods.add(node.module)
    return mods


@pytest.mark.parametrize("package", [kevolve.agent, kevolve.offline, kevolve.sandbox], ids=lambda p: p.__name__)
def test_sandbox_agent_and_offline_do_not_import_the_kernelbench_package(package) -> None:
    root = Path(package.__file__).parent
    offenders = {str(f.relative_to(root)): sorted(m for m in _imported_modules(f) if m.startswith("kevolve.kernelbench"))
                 for f in root.rglob("*.py")}
    assert {f: m for f, m in offenders.items() if m} == {}


def _module_name(root: Path, package: str, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join([package] + (parts[:-1] if parts[-1] == "__init__" else parts))


def _kevolve_imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every kevolve module `path` imports, at module level or inside functions (a lazy import is an import)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # `from pkg import mod` imports the module (its package's __init__ is its parent, not a dependency)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for n in names:
            while n and n not in known:
                n = n.rpartition(".")[0]
            if n and n != name:
                found.add(n)
    return found


def _import_graph(*packages) -> dict[str, set[str]]:
    """Module -> the modules it imports, among every module of `packages` (a cycle may run through several)."""
    files = {}
    for package in packages:
        root = Path(package.__file__).parent
        files |= {_module_name(root, package.__name__, f): f for f in root.rglob("*.py")}
    return {m: _kevolve_imports(f, m, set(files)) for m, f in files.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                comp.append(stack.pop())
                if comp[-1] == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_sandbox_has_no_import_cycle_even_through_lazy_imports() -> None:
    assert _cycles(_import_graph(kevolve.sandbox)) == []


def test_the_loop_and_the_offline_generator_have_no_import_cycle_even_through_lazy_imports() -> None:
    assert _cycles(_import_graph(kevolve.agent, kevolve.offline)) == []


def test_no_module_of_kevolve_is_in_an_import_cycle_even_through_lazy_imports() -> None:
    """Every package at once (a cycle may cross them); the root package's lazy `optimize` re-export excepted."""
    import kevolve
    import kevolve.archive
    import kevolve.kernelbench

    graph = _import_graph(kevolve, kevolve.agent, kevolve.offline, kevolve.sandbox, kevolve.archive,
                          kevolve.kernelbench)
    assert graph["kevolve"] == {"kevolve.agent.api"}  # the one allowed: `kevolve.optimize`, imported on first use
    graph["kevolve"] = set()
    assert len(graph) >= 200 and _cycles(graph) == []  # every module of every package was read


def test_the_offline_generator_does_not_import_the_loop() -> None:
    """The loop drives the generator through its proposer seam (agent/proposer.py); the generator knows records only."""
    graph = _import_graph(kevolve.agent, kevolve.offline)
    assert sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps
                  if m.startswith("kevolve.offline") and d.startswith("kevolve.agent")) == []


# Which zone of the sandbox may import which (sandbox/*/__init__.py say what each zone is). The runner shares a
# process with the candidate: nothing of the judge's or the parent's is ever loaded there.
_MAY_IMPORT = {
    "common": {"common"},
    "policy": {"policy", "isolate"},
    "runner": {"runner", "common", "build", "isolate"},
    "build": {"build", "isolate", "runner", "policy", "root"},
    "judge": {"judge", "common", "isolate", "policy", "build", "root"},
    "isolate": {"isolate", "common", "build", "judge", "root"},
    "parent": {"parent", "judge", "common", "isolate", "policy", "build", "root"},
    "root": {"root", "policy", "isolate"},
}


def test_each_sandbox_zone_imports_only_the_zones_it_may() -> None:
    def zone(m: str) -> str:
        parts = m.split(".")
        return parts[2] if len(parts) > 2 and parts[2] in _MAY_IMPORT else "root"

    graph = _import_graph(kevolve.sandbox)
    assert set(map(zone, graph)) == set(_MAY_IMPORT)
    wrong = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps
                   if d.startswith("kevolve.sandbox") and zone(d) not in _MAY_IMPORT[zone(m)])
    assert wrong == []
