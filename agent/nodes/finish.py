"""finish: write the best ModelNew, the winner's lineage, the report and the result."""

from __future__ import annotations

from langgraph.runtime import Runtime

from kevolve.agent.context import Context
from kevolve.agent.report import write_results
from kevolve.agent.state import RunState


def finish(state: RunState, runtime: Runtime[Context]) -> dict[str, object]:
    reason = state.get("stop_reason") or "done"
    write_results(runtime.context.run, state, reason)
    return {"stop_reason": reason}
