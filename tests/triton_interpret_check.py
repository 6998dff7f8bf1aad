"""Run offline Triton candidates on the CPU under Triton's interpreter, or compile them for sm_90;
print the results as JSON.

    python tests/triton_interpret_check.py gemm_batchnorm bmm            # max errors vs the module
    python tests/triton_interpret_check.py --compile gemm_batchnorm bmm  # compiled for sm_90 (no GPU)
    python tests/triton_interpret_check.py --split=4 matvec              # bare products in 4 K slices
    python tests/triton_interpret_check.py --layout=library conv_relu_bias  # convolutions in this layout

A process of its own because TRITON_INTERPRET must be set (or not) before `triton` is first imported
(its standard library is decorated at import), which a pytest session cannot promise. For each fixture
problem under tests/fixtures/offline, the Triton plan's defaults and one mutation are rendered,
executed, and their launchers run in place of the IR twins; the largest difference from the module's
own output is reported per source.
"""

from __future__ import annotations

import os

import sys  # noqa: E402

COMPILE = "--compile" in sys.argv
LAYOUT = "nhwc" if "--nhwc" in sys.argv else next((a.removeprefix("--layout=") for a in sys.argv
                                                   if a.startswith("--layout=")), None)
SPLIT = next((int(a.removeprefix("--split=")) for a in sys.argv if a.startswith("--split=")), None)
os.environ["TRITON_INTERPRET"] = "0" if COMPILE else "1"  # this process's own setting, before triton's import

import json  # noqa: E402
import importlib.util  # noqa: E402
import random  # noqa: E402
from dataclasses import replace  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "offline"
TRITON_KINDS = ("mm", "tconv")


def reference(problem, seed: int = 0):
    """The module (eval mode, batch-norm statistics that are not 0 / 1) and inputs, as the tests build them."""
    from kevolve.offline.graph.trace import load_namespace

    ns = load_namespace(problem)
    torch.manual_seed(seed)
    model = ns["Model"](*ns["get_init_inputs"]()).eval()
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2.0)
    torch.manual_seed(seed + 1)
    return model, ns["get_inputs"]()


def check(name: str) -> list[float]:
    """Max abs error of the Triton plan's default and mutated candidates against the module."""
    from kevolve.offline.generate import plans
    from kevolve.offline.graph.interpret import run_plan
    from kevolve.offline.space import mutate
    from kevolve.contract import load_problem

    p = [v for v in plans(load_problem(FIXTURES / f"{name}.py")) if v.technique == "triton_mm"][0]
    rng = random.Random(1)
    errs = []
    first = p.defaults()
    if LAYOUT:  # the Triton convolutions' layout (KernelParams.layout), where legal
        first = [replace(x, layout=LAYOUT) if f.group.kind == "tconv" else x for x, f in zip(first, p.fused)]
    if SPLIT is not None:  # the Triton product's K slices (`triton_mm._split_source`), where legal
        first = [replace(x, split_k=SPLIT) if f.group.kind == "mm" else x for x, f in zip(first, p.fused)]
    for params in (p.legalize(first), [mutate(x, f.group, rng) for x, f in zip(first, p.fused)]):
        ns: dict = {"__name__": "kevolve_candidate_check"}
        exec(compile(p.source(params), name, "exec"), ns)  # noqa: S102 — a generated source
        model, inputs = reference(p.problem)
        with torch.no_grad():
            want = model(*inputs)
        kernels = {k: ns[f"_kv_launch_{k}"] for k, f in enumerate(p.fused) if f.group.kind in TRITON_KINDS}
        with torch.no_grad():
            got = run_plan(p, model, inputs, kernels)
        errs.append(float((got - want).abs().max()) if got.shape == want.shape else float("inf"))
    return errs


def compiled(name: str) -> list[str]:
    """Per Triton kernel of the plan's defaults and of the defaults in 'ieee' precision: the matrix
    instruction its PTX uses ('wgmma', 'mma' or 'fma')."""
    from kevolve.offline.generate import plans
    from kevolve.offline.kernels_triton import triton_cl, triton_conv, triton_mm
    from kevolve.contract import load_problem

    p = [v for v in plans(load_problem(FIXTURES / f"{name}.py")) if v.technique == "triton_mm"][0]
    out = []
    for prec in ("tf32x3", "ieee"):
        params = p.legalize([replace(x, precision=prec, layout=LAYOUT or "nchw") for x in p.defaults()])
        with tempfile.TemporaryDirectory() as d:  # @triton.jit reads its function's source from a file
            path = os.path.join(d, f"cand_{name}_{prec}.py")
            with open(path, "w") as f:
                f.write(p.source(params))
            spec = importlib.util.spec_from_file_location(f"cand_{name}_{prec}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            for k, (fz, q) in enumerate(zip(p.fused, params)):
                if fz.group.kind in TRITON_KINDS:
                    kmod = triton_mm if fz.group.kind == "mm" else triton_conv
                    ptx = kmod.compile_for(getattr(mod, f"kv_{fz.group.kind}_{k}"), fz.group, q)["ptx"]
                    out.append("wgmma" if "wgmma" in ptx else "mma" if "mma.sync" in ptx else "fma")
                    if q.layout == "library":  # its input's channels-last copy, a kernel of its own
                        ptx = triton_cl.compile_copy_for(getattr(mod, f"kv_tconv_{k}_cl"), fz.group)["ptx"]
                        out.append("copy" if "st.global" in ptx else "no store")
    return out


if __name__ == "__main__":
    names = [a for a in sys.argv[1:] if not a.startswith("--")]
    print(json.dumps({name: (compiled if COMPILE else check)(name) for name in names}))
