"""finish: write the best ModelNew, lineage, report and result (the archive got each verdict as it came)."""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from kevolve.agent.context import Context
from kevolve.agent.report import write_results
from kevolve.agent.state import RunState

log = logging.getLogger(__name__)


def finish(state: RunState, runtime: Runtime[Context]) -> dict[str, object]:
    ctx = runtime.context
    reason = state.get("stop_reason") or "done"
    counts = getattr(ctx.store, "counts", None)
    if counts:
        log.info("archive: %d stored, %d skipped, %d failed", counts["stored"], counts["skipped"], counts["failed"])
    write_results(ctx.run, state, reason)
    return {"stop_reason": reason}
