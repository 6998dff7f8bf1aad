"""The graph's node bodies, one module per step: retrieve, plan, propose, evaluate, select, finish."""
