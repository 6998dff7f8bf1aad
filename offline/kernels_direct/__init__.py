"""The offline generator's direct kernels for whole library ops: convolution, pooling, GEMM, arg-reductions, scans."""
