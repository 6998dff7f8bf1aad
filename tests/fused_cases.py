"""Cases for the judge's one-pass comparison kernel (sandbox/judge/fused_compare.py) against the torch path it
replaces: the same poison, non-finite and error decisions, case by case. In a subprocess, since Triton
picks its interpreter (TRITON_INTERPRET) when first imported; CASE_DEVICE=cuda runs the compiled kernel."""

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, os, torch
    from kevolve.sandbox.judge import fused_compare
    from kevolve.sandbox.judge.checks import fingerprint
    from kevolve.sandbox.judge.correctness import error_stats, has_poison
    from kevolve.sandbox.common.harness import POISON_BITS

    def torch_path(c, t):
        fin_t = torch.isfinite(t)
        bad = not torch.equal(torch.isfinite(c), fin_t) or not torch.equal(c[~fin_t].isnan(), t[~fin_t].isnan()) \\
            or not torch.equal(torch.isposinf(c), torch.isposinf(t))
        return has_poison(c), bad, None if bad else error_stats(c, t, fin_t)

    def fused_path(c, t):
        prints = []
        p, bad, mt, st, md, sd, far = fused_compare.run_kernel(c.contiguous(), t.contiguous(), prints)
        rel = (md / mt if mt else md, (sd ** 0.5) / (st ** 0.5) if st else sd ** 0.5, far)
        same_print = (tuple(prints[0]) == fingerprint([c])) if c.element_size() == 4 else (None if not prints else False)
        return p > 0, bad > 0, None if bad else rel, same_print

    g = torch.Generator().manual_seed(3)
    out = {}
    dev = os.environ.get("CASE_DEVICE", "cpu")
    def case(name, c, t):
        c, t = c.to(dev), t.to(dev)
        a, b = torch_path(c, t), fused_path(c, t)
        out[name] = [a[0], a[1], a[2], b[0], b[1], b[2], b[3]]

    n = fused_compare.BLOCK * 2 + 77  # a block and a ragged tail
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        t = torch.randn(n, generator=g).to(dt)
        c = (t.double() + 1e-3 * torch.randn(n, generator=g, dtype=torch.float64)).to(dt)
        case(f"close-{dt}", c, t)
        case(f"exact-{dt}", t.clone(), t)
        int_dtype, bits = POISON_BITS[dt]
        w = 8 * t.element_size()
        pat = bits - (1 << w) if bits >= 1 << (w - 1) else bits
        p = c.clone()
        p.view(int_dtype)[n - 3] = pat
        case(f"poison-{dt}", p, t)
    t = torch.randn(n, generator=g)
    t[5], t[9], t[n - 1] = float("nan"), float("inf"), float("-inf")
    same = t.clone()
    case("nonfinite-same", same, t)
    flipped = t.clone(); flipped[9] = float("-inf")
    case("inf-sign", flipped, t)
    nan_c = t.clone(); nan_c[100] = float("nan")
    case("nan-in-candidate", nan_c, t)
    fin_c = t.clone(); fin_c[5] = 0.0
    case("number-for-nan", fin_c, t)
    z = torch.zeros(n)
    case("zero-truth", z + 1e-7, z)
    big = torch.randn(n, generator=g) * 1e30
    case("large", big * (1 + 1e-6), big)
    # far elements: the small half of a wide-range output zeroed (red team 5), underflow left alone
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        w = torch.exp(torch.randn(n, generator=g, dtype=torch.float64) * 4).to(dt)
        cut = w.clone(); cut[w < w.double().median().to(dt)] = 0
        case(f"far-{dt}", cut, w)
    under = torch.full((n,), 1e-39); under[: n // 2] = 1.0  # float32 denormals: below the smallest normal
    case("underflow-zeroed", torch.where(under < 1e-30, 0.0, under), under)
    print(json.dumps(out))
""")


def cases(env: dict[str, str]) -> dict:
    # -P: from the repository root, its kevolve/ folder is not the installed package
    r = subprocess.run([sys.executable, "-P", "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def check(out: dict) -> None:
    assert len(out) == 23
    for name, (p0, b0, e0, p1, b1, e1, same_print) in out.items():
        assert (p0, b0) == (p1, b1), name
        # float32: the kernel's fingerprint is checks.fingerprint's, bit for bit; other widths make none
        assert same_print is (True if "float32" in name or "." not in name else None), name
        if e0 is not None:
            assert e1 == pytest.approx(e0, rel=1e-9, abs=1e-300), name
    assert out["poison-torch.float32"][0] and out["poison-torch.bfloat16"][0]
    assert out["inf-sign"][1] and out["nan-in-candidate"][1] and out["number-for-nan"][1]
    assert not out["nonfinite-same"][1] and out["nonfinite-same"][2] == [0.0, 0.0, 0.0]
    assert out["close-torch.float32"][2][0] > 1e-5
    n = out["nonfinite-same"][2]
    for dt in ("float32", "float16", "bfloat16", "float64"):  # about half of the elements far, both paths alike
        assert out[f"far-torch.{dt}"][2][2] > 4000, dt
        # 1e-3 of noise on randn: only elements under ~2e-3 are far (~0.2% of them), and none of an exact copy
        assert out[f"close-torch.{dt}"][2][2] < 0.01 * 8269 and out[f"exact-torch.{dt}"][2][2] == 0, dt
    assert out["underflow-zeroed"][2][2] == 0 and n[2] == 0
