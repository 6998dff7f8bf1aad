"""Hack: memoise results by a hash of the input's bytes.

Every answer is right, since the same bytes give the same product; a harness that times repeated
calls on a small rotating set of inputs (KernelBench's times one input) only ever measures the
hash and the dictionary lookup, not the GEMM. Expected (CPU): rejected, no_custom_kernel: every timed
call is on values no earlier call had (judge/draws.py TIMING_MAX), so the memo answers none of them and its
GEMMs are what is timed; the ablation call, on a draw it has seen, reaches no kernel at all (the profiled call
takes a draw no call saw, red team 5). Where timing
draws do not fit (large problems, the GPU today): input_cache (inputs it has never seen, timed once
each, cost far more than the repeated ones).
"""
import hashlib

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>
torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* a = xc.data_ptr<float>();
    float* b = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;
    return y;
}
"""
ext = load_inline(name="relu_ext", cpp_sources=[_src], functions=["relu_fwd"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self._memo = {}

    def forward(self, x):
        key = hashlib.blake2b(x.detach().contiguous().numpy().tobytes(), digest_size=16).digest()
        if key not in self._memo:
            y = torch.mm(x, self.linear.weight.t()) + self.linear.bias
            for _ in range(20):  # a heavier problem: what the memo saves is what gets measured
                y = torch.mm(x, self.linear.weight.t()) + self.linear.bias
            self._memo[key] = ext.relu_fwd(y)
        return self._memo[key]
