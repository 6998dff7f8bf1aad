"""What shape propagation left on a torch.fx node: its static shape and dtype.

Read by tracing's own decompositions and by every group builder; kept apart from trace.py so that the
decompositions, which trace.py runs, need not import it back.
"""

from __future__ import annotations

import torch
import torch.fx


def node_shape(node: torch.fx.Node) -> tuple[int, ...] | None:
    """The static shape of a tensor-valued node, None otherwise."""
    tm = node.meta.get("tensor_meta")
    if tm is None or not hasattr(tm, "shape"):
        return None
    return tuple(int(s) for s in tm.shape)


def node_dtype(node: torch.fx.Node) -> torch.dtype | None:
    """The dtype of a tensor-valued node, None otherwise."""
    tm = node.meta.get("tensor_meta")
    return getattr(tm, "dtype", None)
