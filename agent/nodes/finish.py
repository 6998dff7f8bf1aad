"""finish: put the run's candidates in the archive; write the best ModelNew, lineage, report, result."""

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
    if ctx.store is not None:
        try:
            added = ctx.store(state["problem"], state.get("trials", []), ctx.run.run_id)
            log.info("archive: %d new kernel(s) stored", added)
        except Exception as e:  # noqa: BLE001 — the results on disk matter more than the archive copy
            log.warning("archive: could not store this run's kernels: %s", str(e).splitlines()[0][:200])
    write_results(ctx.run, state, reason)
    return {"stop_reason": reason}
