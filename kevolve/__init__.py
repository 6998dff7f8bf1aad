"""kevolve: LLM-written CUDA kernels, kept only when provably right and measurably faster."""

__version__ = "0.1.0"
