"""The optimizer: a LangGraph loop that proposes, evaluates and evolves candidate kernels.

`kevolve.agent.run.optimize` is the entry point; `graph.py` shows the loop's shape.
"""
