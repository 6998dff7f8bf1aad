"""kevolve: LLM-written CUDA kernels, kept only when provably right and measurably faster."""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy: `import kevolve` must not load torch or langgraph.
    if name == "optimize":
        from kevolve.agent.api import optimize

        return optimize
    raise AttributeError(f"module 'kevolve' has no attribute {name!r}")
