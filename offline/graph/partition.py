"""Partition a traced graph into fused groups (one kernel each) and torch calls (everything else).

Greedy, from the graph's end: each fusible node starts a group, which then absorbs its fusible
producers whose every user is already in the group, as long as the group still builds into one
kernel (`build.build_group`). Library calls (matmul, convolution, pooling …) and anything not in the
op table stay torch calls, so a chain after a convolution becomes one epilogue kernel.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch.fx
from kevolve.offline.graph.build import Unfusable, build_group
from kevolve.offline.graph.canon import Canon, canonicalize
from kevolve.offline.graph.ir import Group

log = logging.getLogger(__name__)


@dataclass
class Fused:
    """One group: its IR, the fx nodes it replaces (sink last), its leaves (fx nodes or ParamRefs)."""

    group: Group
    nodes: list[torch.fx.Node]
    extra: list[torch.fx.Node]
    leaf_refs: list[Any]

    @property
    def sink(self) -> torch.fx.Node:
        return self.nodes[-1]


def _via(c: Canon) -> list[torch.fx.Node]:
    v = c.params.get("via")
    return [v] if isinstance(v, torch.fx.Node) else []


def partition(gm: torch.fx.GraphModule, max_nodes: int = 64) -> list[Fused]:
    """The fused groups of `gm`, in graph order."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    canon: dict[torch.fx.Node, Canon] = {}
    for n in gm.graph.nodes:
        c = canonicalize(n, gm)
        if c is not None:
            canon[n] = c
    assigned: set[torch.fx.Node] = set()
    out: list[Fused] = []
    for n in reversed(list(gm.graph.nodes)):
        if n not in canon or n in assigned:
            continue
        members = [n]
        try:
            group, refs = build_group(members, n, canon)
        except Unfusable as e:
            log.debug("%s stays a torch call: %s", n.name, e)
            continue
        grown = True
        while grown and len(members) < max_nodes:
            grown = False
            mset = set(members) | {v for m in members for v in _via(canon[m])}
            for m in list(members):
                for a in canon[m].inputs:
                    if not isinstance(a, torch.fx.Node) or a not in canon or a in assigned or a in mset:
                        continue
                    if not set(a.users) <= mset:
                        continue
                    trial = sorted([*members, a], key=order.__getitem__)
                    try:
                        group, refs = build_group(trial, n, canon)
                    except Unfusable as e:
                        log.debug("%s not fused into %s: %s", a.name, n.name, e)
                        continue
                    members, grown = trial, True
                    break
                if grown:
                    break
        extra = [v for m in members for v in _via(canon[m])]
        if any(set(v.users) - set(members) for v in extra):
            continue
        assigned.update(members, extra)
        out.append(Fused(group=group, nodes=members, extra=extra, leaf_refs=refs))
    out.sort(key=lambda f: order[f.sink])
    return out
