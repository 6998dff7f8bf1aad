"""The offline proposer: kernels generated from the traced module, no LLM needed.

trace (torch.fx + fake shapes) → canon (one spelling per op) → partition/build (fused groups, the IR)
→ cuda / cuda_row / cuda_split / cuda_pair (CUDA C per group and parameters; one-pass norm and softmax
statistics) → emit (a ModelNew candidate source; cudagraph wraps its forward in a CUDA graph on request);
space holds the tunable parameters, proposer plugs it all into the agent loop as an LLM.
"""
