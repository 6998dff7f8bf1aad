"""The offline generator's Triton kernel writers: matrix products with fused epilogues, convolutions, element-wise expressions, and the CPU sweep."""
