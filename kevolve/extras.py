"""What to install when an optional package is missing, in one line (imports nothing heavy).

`pip install kevolve` brings everything the main job needs (the agent, the sandbox, the archive);
these extras add what only some commands use. A command that reaches for one of them without it
says which extra to install instead of ending in a traceback.
"""

from __future__ import annotations

import importlib.util

from kevolve.languages import LANGUAGES

# top-level module -> (extra to install, what needs it, as the start of a sentence)
EXTRAS: dict[str, tuple[str, str]] = {
    "pyarrow": ("kevolve[archive]", "Parquet files need"),
    "psycopg": ("kevolve[archive]", "a PostgreSQL archive needs"),
    "ray": ("kevolve[bench]", "--executor ray needs"),
    "einops": ("kevolve[kernelbench]", "KernelBench's Mamba2 problems (level 3) need"),
    # the kernel languages' modules (kevolve/languages.py)
    **{m: (lang.extra, f"{lang.name} kernels need") for lang in LANGUAGES.values() if lang.extra for m in lang.modules},
    "cupy_backends": ("kevolve[cuda]", "cupy kernels need"),  # the CuPy wheel's own C-extension package
}


def install_hint(module: str) -> str:
    """One line: which package is missing, what needs it, and the pip command that brings it."""
    top = (module or "?").split(".")[0]
    if top in EXTRAS:
        extra, what = EXTRAS[top]
        return f"{what} the Python package {top!r}, which is not installed: pip install '{extra}'"
    return (f"the Python package {top!r} is missing from this install (a partial or old install of kevolve?): "
            f"pip install --upgrade kevolve, or pip install {top}")


def missing(module: str) -> str | None:
    """install_hint(module) when `module` cannot be imported here, else None (nothing is imported)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else install_hint(module)


__all__ = ["EXTRAS", "install_hint", "missing"]
