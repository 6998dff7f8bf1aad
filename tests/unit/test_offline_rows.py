"""Offline row kernels at the memory roofline: vectorized walks, one-pass statistics, the scalar twin for
misaligned pointers, CUDA-graph replay as a plan setting, and the search's precision fallback.

No GPU here: the CUDA is compiled with NVRTC for compute_90, the launchers run on CPU tensors with the
kernel launch recorded, and the graph runtime's recapture rule is checked on CPU tensors."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from kevolve.offline.kernels_cuda.cuda import PRELUDE
from kevolve.offline.kernels_cuda.cuda_pair import SOFTMAX, WELFORD, find_pairs, steps
from kevolve.offline.kernels_cuda.cuda_row import vector_leaf, vector_out
from kevolve.offline.generate import plan, plans
from kevolve.offline.graph.interpret import run_plan
from kevolve.offline.search import search
from kevolve.offline.space import legal, mutate
from kevolve.contract import load_problem, problem_from_source
from kevolve.records import Evaluation, Outcome, TimingStats
from kevolve.sandbox.policy.candidate import check_policy

FIXTURES = Path(__file__).parent.parent / "fixtures" / "offline"

_LAYERNORM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(4, 8, 16, 32) * 3.0 + 100.0]


def get_init_inputs():
    return [(8, 16, 32)]
'''




def test_the_shipped_row_defaults_are_vector_and_one_pass() -> None:
    """On since the H100 passed tests/gpu/test_offline_gpu.py with them (2026-11-24, fifth session)."""
    p = _layernorm()
    params = p.legalize(p.defaults())
    assert params[0].vec > 1 and params[0].onepass is True
    assert "float4" in _cuda(p.source(params)) or "float2" in _cuda(p.source(params))


def _layernorm():
    return plan(problem_from_source(_LAYERNORM, name="layernorm_vec"))


def _cuda(src: str) -> str:
    return re.search(r"_KV_SRC = r'''(.*?)'''", src, re.DOTALL).group(1)


def _exec(src: str) -> dict:
    ns: dict = {"__name__": "candidate"}
    exec(compile(src, "candidate", "exec"), ns)  # noqa: S102 - the offline proposer's own output
    return ns


@pytest.mark.parametrize(("name", "kinds"), [("layernorm_3d", [WELFORD]), ("conv_groupnorm", [WELFORD]),
                                             ("linear_gelu_softmax", [SOFTMAX]), ("logsumexp_chain", [SOFTMAX]),
                                             ("rmsnorm", [])])
def test_norms_and_softmax_need_one_walk_before_the_output(name, kinds):
    g = plan(load_problem(FIXTURES / f"{name}.py")).fused[0].group
    assert [p.kind for p in find_pairs(g).values()] == kinds
    assert len(steps(g, onepass=True)) == len(g.reductions) - len(kinds)
    assert len(steps(g, onepass=False)) == len(g.reductions)


def test_every_row_setting_compiles_with_nvrtc():
    """Strategies x one-pass x vector widths x unroll, on norms, softmax, losses and plain reductions."""
    from kevolve.sandbox.build.compile import nvrtc_compile

    settings = [(s, o, v, u) for s in ("block", "warp", "thread", "split") for o in (True, False)
                for v, u in ((1, 1), (2, 2), (4, 1), (4, 4))]
    parts, n = [PRELUDE], 0
    for p in [_layernorm(), *(plan(load_problem(FIXTURES / f"{f}.py")) for f in
                              ("linear_gelu_softmax", "instnorm_logsoftmax", "mse_loss", "reductions", "rmsnorm"))]:
        for s, o, v, u in settings:
            src = p.source([replace(x, strategy=s, onepass=o, vec=v, unroll=u) for x in p.defaults()])
            compile(src, "candidate", "exec")
            parts.append(_cuda(src).replace(PRELUDE, "").replace("kv_fused_", f"kv_c{n}_"))
            n += 1
    ok, log = nvrtc_compile("\n".join(parts), arch="compute_90")
    assert ok, log[:3000]


def test_layernorm_walks_float4_and_merges_split_chunks_in_two_kernels():
    p = _layernorm()
    g = p.fused[0].group
    params = p.legalize(p.defaults())
    assert params[0].vec == 4 and all(vector_leaf(g, li, 4) for li in range(3)) and vector_out(g, 4)
    src = p.source([replace(params[0], strategy="split")])
    cuda = _cuda(src)
    assert "reinterpret_cast<const float4*>(in0 + b0)" in cuda and "kv_welford_merge(" in cuda
    assert re.findall(r"void __launch_bounds__\(\d+\) (kv_fused_0\w*)\(", cuda) == [
        "kv_fused_0_s0", "kv_fused_0_s1", "kv_fused_0_v1_s0", "kv_fused_0_v1_s1"]
    assert "float4" not in cuda[cuda.index("kv_fused_0_v1_s0"):]  # the twin reads scalars only


def test_rows_that_are_not_multiples_of_the_vector_width_walk_scalars():
    g = plan(load_problem(FIXTURES / "layernorm_3d.py")).fused[0].group  # rows of 63 elements
    assert legal(replace(legal(_layernorm().defaults()[0], g), vec=4), g).vec == 1
    assert not vector_leaf(g, 0, 2) and not vector_out(g, 4)


def _recorded_launch(src: str, x: torch.Tensor) -> str:
    """The kernel name the generated launcher picks for `x` (CPU tensors; the launch itself recorded)."""
    ns = _exec(src)
    launched: list[str] = []
    ns["_kv_launch"] = lambda name, grid, block, tensors: launched.append(name)
    ns["_kv_sms"] = lambda dev: 132
    model = ns["Model"]((8, 16, 32)).eval()
    ns["_kv_launch_0"](x, model.ln.weight, model.ln.bias)
    return launched[0]


def test_misaligned_input_takes_the_scalar_twin_and_strided_input_is_made_contiguous():
    src = _layernorm().source()
    base = torch.randn(4 * 8 * 16 * 32 + 1)
    misaligned = base[1:].view(4, 8, 16, 32)
    assert misaligned.is_contiguous() and misaligned.data_ptr() % 16 == 4
    assert _recorded_launch(src, misaligned) == "kv_fused_0_v1"
    strided = torch.randn(32, 16, 8, 4).permute(3, 2, 1, 0)  # not contiguous: copied, so aligned again
    assert _recorded_launch(src, strided) == "kv_fused_0"


def test_one_pass_candidates_keep_the_ir_numerics_and_the_policy():
    p = _layernorm()
    ns = _exec(p.source())
    torch.manual_seed(0)
    model = ns["Model"]((8, 16, 32)).eval()
    x = torch.randn(4, 8, 16, 32) * 3.0 + 100.0
    torch.testing.assert_close(run_plan(p, model, [x]), model(x), rtol=1e-4, atol=1e-4)
    for params in ([replace(q, onepass=o, vec=v) for q in p.defaults()] for o in (True, False) for v in (1, 4)):
        assert check_policy(p.source(params)) is None


def test_row_mutations_reach_vector_width_and_one_pass_and_stay_legal():
    import random

    g = _layernorm().fused[0].group
    rng = random.Random(1)
    p = legal(_layernorm().defaults()[0], g)
    seen = set()
    for _ in range(60):
        p = mutate(p, g, rng)
        assert g.row_len % p.vec == 0 and p.unroll in (1, 2, 4)
        seen.add((p.vec, p.onepass))
    assert {v for v, _ in seen} == {1, 2, 4} and {o for _, o in seen} == {True, False}


# --- CUDA graphs -------------------------------------------------------------------------------------

def test_graph_candidate_replays_the_traced_forward_behind_the_same_guards():
    p = plan(load_problem(FIXTURES / "instnorm_logsoftmax.py"))
    params = p.defaults()
    plain, got = p.source(params), p.generate([replace(params[0], graph=True), *params[1:]])
    graphed = got.source
    assert "CUDAGraph" not in plain and "self._kv_replay((" in graphed
    assert got.choice.groups[1].graph  # the setting is the whole forward's: every group carries it
    assert check_policy(graphed) is None
    ns = _exec(graphed)
    torch.manual_seed(0)
    model, ref = ns["ModelNew"](*_init(p)).eval(), None
    x = torch.randn(*p.traced.input_shapes[0])
    ref = ns["Model"].forward(model, x)
    torch.testing.assert_close(model(x), ref)  # CPU input: the guard falls back to the reference


def _init(p):
    ns = _exec(p.problem.source)
    return ns["get_init_inputs"]()


def test_graph_is_recaptured_when_layouts_scalars_or_weights_change_but_not_for_new_values():
    from kevolve.offline.kernels_cuda.cudagraph import RUNTIME

    ns = {"torch": torch}
    exec(RUNTIME, ns)  # noqa: S102 - the runtime the generated candidates carry
    key = ns["_kv_graph_key"]
    model = torch.nn.Linear(8, 4)
    x = torch.randn(3, 8)
    k0 = key(model, (x, 2.0))
    assert key(model, (torch.randn(3, 8), 2.0)) == k0  # new values, new address: copied in, same graph
    assert key(model, (torch.randn(4, 8), 2.0)) != k0
    assert key(model, (torch.randn(8, 3).t(), 2.0)) != k0
    assert key(model, (x.double(), 2.0)) != k0
    assert key(model, (x, 3.0)) != k0  # a number is baked into the capture
    model.weight = torch.nn.Parameter(model.weight.detach().clone())
    assert key(model, (x, 2.0)) != k0  # a replaced weight lives at another address


def test_graph_outputs_are_clones_that_never_alias_the_graphs_memory():
    from kevolve.offline.kernels_cuda.cudagraph import RUNTIME

    ns = {"torch": torch}
    exec(RUNTIME, ns)  # noqa: S102
    a, b = torch.randn(3), torch.randn(2)
    out = ns["_kv_clone"]((a, [b]))
    assert torch.equal(out[0], a) and out[0].data_ptr() != a.data_ptr() and out[1][0].data_ptr() != b.data_ptr()


def _timing(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, trials=10, method="fake")


def test_search_tries_the_graph_once_on_its_best_multi_kernel_candidate():
    p = plan(load_problem(FIXTURES / "instnorm_logsoftmax.py"))
    evaluate = lambda got: Evaluation(candidate_id="c", problem_id=p.problem.id, outcome=Outcome.OK,  # noqa: E731
                                      reason="ok", timing=_timing(0.5), ref_timing=_timing(1.0))
    res = search(p, evaluate, budget=8)
    graphs = [t for t in res.trials if t.params[0].graph]
    assert len(graphs) == 1 and graphs[0] is res.trials[1]


def test_search_retries_an_incorrect_tf32x3_product_in_ieee():
    variants = plans(load_problem(FIXTURES / "only_matmul.py"))
    tri = next(v for v in variants if v.technique == "triton_mm")

    def evaluate(got) -> Evaluation:  # noqa: ANN001 - a Generated
        prec = got.choice.groups[0].precision
        ok = prec == "ieee"
        return Evaluation(candidate_id="c", problem_id=tri.problem.id, outcome=Outcome.OK if ok else Outcome.INCORRECT,
                          reason="ok" if ok else "incorrect: max error", timing=_timing(0.5) if ok else None,
                          ref_timing=_timing(1.0))

    res = search(tri, evaluate, budget=3)
    assert [t.params[0].precision for t in res.trials[:2]] == ["tf32x3", "ieee"]
    assert res.best is not None and res.best.params[0].precision == "ieee"


def test_offline_repair_of_a_tf32x3_parent_proposes_ieee_products():
    from kevolve.offline.proposer import OfflineGenerator

    problem = load_problem(FIXTURES / "only_matmul.py")
    prop = OfflineGenerator(problem)
    tri = next(v for v in prop.plans() if v.technique == "triton_mm")
    got = prop.repair([tri.generate().choice])
    assert got is not None and got[0].technique == "triton_mm" and got[1][0].precision == "ieee"
    assert prop.repair([tri.generate(got[1]).choice]) is None  # already ieee: nothing left to repair this way
