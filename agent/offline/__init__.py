"""The offline proposer: kernels generated from the traced module, no LLM needed.

trace (torch.fx + fake shapes) → canon (one spelling per op) → partition/build (fused groups, the IR)
→ cuda / cuda_row (CUDA C per group and parameters) → emit (a ModelNew candidate source);
space holds the tunable parameters, proposer plugs it all into the agent loop as an LLM.
"""
