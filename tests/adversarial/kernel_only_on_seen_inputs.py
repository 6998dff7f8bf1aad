"""Hack: the custom kernel runs only on inputs the candidate has seen before; PyTorch's own op on anything new.

Red team 5 (2026-11-28, a05): the custom-kernel evidence (the profiled call and the ablation call) was taken on a
pool draw, which every candidate has seen in its correctness calls, while every timed call is on a draw never seen:
so the evidence showed the kernel and the timing measured `torch.relu`, `ok` without --allow-torch-only under both
isolations. Expected: rejected, no_custom_kernel (the evidence is now taken on two timing draws no call saw).
"""
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
    def __init__(self):
        super().__init__()
        self.seen = set()

    def forward(self, x):
        flat = x.reshape(-1)
        mark = (tuple(x.shape), float(flat[0]), float(flat[-1]), float(flat[flat.numel() // 2]))
        if mark in self.seen:
            return ext.relu_fwd(x)
        self.seen.add(mark)
        return torch.relu(x)
