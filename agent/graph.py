"""The optimizer's loop as a LangGraph StateGraph. Shape only: node bodies live in nodes/.

    retrieve → plan ─(one Send per job)→ propose → evaluate → select ─→ plan … ─→ finish
                 └──────────(no jobs)──────────────────────────────────→ finish
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from kevolve.agent.context import Context
from kevolve.agent.nodes.evaluate import evaluate
from kevolve.agent.nodes.finish import finish
from kevolve.agent.nodes.plan import plan
from kevolve.agent.nodes.propose import propose
from kevolve.agent.nodes.retrieve import retrieve
from kevolve.agent.nodes.select import select
from kevolve.agent.routing import after_plan, after_select
from kevolve.agent.state import RunState


def build_graph() -> StateGraph:
    g = StateGraph(RunState, context_schema=Context)
    g.add_node("retrieve", retrieve)
    g.add_node("plan", plan)
    g.add_node("propose", propose, destinations=("evaluate",))  # a Command(Send) per proposal
    g.add_node("evaluate", evaluate)
    g.add_node("select", select)
    g.add_node("finish", finish)
    g.add_edge(START, "retrieve")
    g.add_edge("retrieve", "plan")
    g.add_conditional_edges("plan", after_plan, ["propose", "finish"])
    g.add_edge("evaluate", "select")
    g.add_conditional_edges("select", after_select, ["plan", "finish"])
    g.add_edge("finish", END)
    return g


def mermaid() -> str:
    """The graph as a mermaid diagram (`kevolve optimize --graph`)."""
    return build_graph().compile().get_graph().draw_mermaid()
