"""retrieve: verified solutions of similar problems from the archive, for the translate prompts."""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from kevolve.agent.context import Context
from kevolve.agent.state import RunState

log = logging.getLogger(__name__)


def _as_source(item: object) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        src = item.get("source")
        return src if isinstance(src, str) else None
    src = getattr(item, "source", None)
    return src if isinstance(src, str) else None


def retrieve(state: RunState, runtime: Runtime[Context]) -> dict[str, object]:
    ctx = runtime.context
    if ctx.retrieve is None or state.get("examples"):
        return {"examples": state.get("examples", [])}
    try:
        found = ctx.retrieve(state["problem"].source, ctx.config.archive_k)
    except Exception as e:  # noqa: BLE001 — the archive is an aid: a broken one must not stop a run
        log.warning("archive retrieval failed, going on without examples: %s", str(e).splitlines()[0][:200])
        return {"examples": []}
    examples = [s for s in map(_as_source, found or []) if s]
    log.info("retrieved %d archive example(s)", len(examples))
    return {"examples": examples[:ctx.config.archive_k]}
