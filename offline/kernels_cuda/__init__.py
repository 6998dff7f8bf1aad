"""The offline generator's CUDA C writers: pointwise and row kernels, split and paired rows, launchers, CUDA graphs, and the candidate source."""
