"""Synthetic archive entries: KernelBench-like problems and CUDA kernels with known techniques.

Used by ``scripts/bench_archive.py`` (10,000 kernels) and by the tests. Deterministic for a seed.
Each kernel is assembled from snippets whose technique tags are known, so tests can check that
search and filters find what was put in.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from kevolve.archive.store import Entry
from kevolve.records import Candidate, CheckResult, Evaluation, Origin, Outcome, Problem, TimingStats

OPS: dict[str, str] = {
    "Matmul": "torch.matmul(a, b)",
    "ReLU": "torch.relu(x)",
    "Softmax": "torch.softmax(x, dim=1)",
    "LayerNorm": "self.ln(x)",
    "GELU": "torch.nn.functional.gelu(x)",
    "Conv2d": "self.conv(x)",
    "Sum_Reduction": "torch.sum(x, dim=1)",
    "Transpose": "x.t().contiguous()",
    "Matmul_ReLU_Add": "torch.relu(torch.matmul(a, b)) + c",
    "Cumsum": "torch.cumsum(x, dim=1)",
    "Attention": "torch.softmax(q @ k.transpose(-1, -2), -1) @ v",
    "MaxPool2d": "self.pool(x)",
}

SNIPPETS: dict[str, str] = {
    "shared_memory": "__shared__ float buf[256];\n    buf[threadIdx.x] = in[i];\n    __syncthreads();",
    "vectorized_loads": "float4 v = reinterpret_cast<const float4*>(in)[i];",
    "warp_shuffle": "for (int o = 16; o > 0; o /= 2) val += __shfl_down_sync(0xffffffff, val, o);",
    "tensor_cores": "wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;",
    "tiling": "#define TILE 16\n    __shared__ float As[TILE][TILE];\n    __shared__ float Bs[TILE][TILE];",
    "fusion": "// fused epilogue\n    out[i] = fmaxf(acc + bias[col], 0.f);",
    "loop_unrolling": "#pragma unroll\n    for (int k = 0; k < 4; ++k) acc += a[k];",
    "atomics": "atomicAdd(&out[blockIdx.x], val);",
}


def problem_source(op: str, expr: str) -> str:
    """A KernelBench-format problem file for one op."""
    return (f'import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    """{op.replace("_", " ")}."""\n\n'
            f"    def __init__(self):\n        super().__init__()\n\n    def forward(self, a, b=None, c=None, x=None):\n"
            f"        x = a if x is None else x\n        q = k = v = a\n        return {expr}\n\n\n"
            f"def get_inputs():\n    return [torch.randn(256, 256)]\n\n\ndef get_init_inputs():\n    return []\n")


def kernel_source(op: str, tags: list[str], variant: int) -> str:
    """A ModelNew source whose CUDA code uses exactly the snippets named by ``tags``."""
    body = "\n    ".join(SNIPPETS[t] for t in tags)
    return (f'import torch\nfrom torch.utils.cpp_extension import load_inline\n\ncuda_src = r"""\n'
            f"__global__ void {op.lower()}_kernel_v{variant}(const float* in, float* out, int n) {{\n"
            f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    float val = 0.f, acc = 0.f;\n    {body}\n"
            f"    if (i < n) out[i] = val + acc;\n}}\n\"\"\"\n\n\nclass ModelNew(torch.nn.Module):\n"
            f"    def forward(self, *args):\n        return ext.run(*args)  # variant {variant}\n")


def _timing(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, mean_ms=ms * 1.01, min_ms=ms * 0.98, max_ms=ms * 1.1, iqr_ms=ms * 0.02,
                       trials=30, method="synthetic")


def entries(n_kernels: int, n_problems: int | None = None, seed: int = 0,
            ok_fraction: float = 0.7) -> Iterator[Entry]:
    """``n_kernels`` entries spread over ``n_problems`` problems (default: one per 40 kernels)."""
    rng = random.Random(seed)
    n_problems = n_problems or max(1, n_kernels // 40)
    ops = list(OPS)
    problems = []
    for j in range(n_problems):
        op = ops[j % len(ops)]
        name = f"{j + 1}_{op}" if j < len(ops) else f"{j + 1}_{op}_v{j // len(ops)}"
        src = problem_source(op, OPS[op]) + f"# problem {j}\n"
        problems.append((op, Problem.from_source(src, f"synthetic/{name}.py", name, level=1 + j % 3)))
    previous: dict[str, str] = {}
    for i in range(n_kernels):
        op, prob = problems[i % n_problems]
        tags = sorted(rng.sample(list(SNIPPETS), rng.randint(0, 3)))
        parent = previous.get(prob.id)
        cand = Candidate.from_source(kernel_source(op, tags, i), prob.id, parent_ids=(parent,) if parent else (),
                                     origin=Origin.MUTATE if parent else Origin.TRANSLATE, proposer="synthetic")
        ok = rng.random() < ok_fraction
        ref = rng.uniform(0.05, 5.0)
        ms = ref / rng.uniform(0.3, 6.0)
        ev = Evaluation(candidate_id=cand.id, problem_id=prob.id, outcome=Outcome.OK if ok else Outcome.INCORRECT,
                        reason="ok" if ok else "value: output 0: max error 3.1e-01",
                        checks=(CheckResult(name="correct:draw0", passed=ok,
                                            detail=f"err {rng.uniform(1e-7, 1e-4):.2e} (allowed 1.0e-04)"),),
                        timing=_timing(ms) if ok else None, ref_timing=_timing(ref),
                        compile_ref_timing=_timing(ref * rng.uniform(0.5, 1.0)),
                        device=rng.choice(["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA L40S"]),
                        wall_s=1.0)
        previous[prob.id] = cand.id
        yield Entry(problem=prob, candidate=cand, evaluation=ev, kernel_name=f"{op.lower()}_v{i}",
                    run_id=f"synthetic-{seed}")
