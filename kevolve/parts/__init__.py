"""Whole models in parts (issue 34, "decompose, optimize, compose"): a model problem split into part problems
(`decompose`), and the parts' candidates composed back into one `ModelNew` of the whole model (`compose`).

Runs in the parent (the orchestrator): it executes the user's own problem file, never a candidate's code; the
composition is plain source text, judged as a whole by the sandbox like any other candidate.
"""
