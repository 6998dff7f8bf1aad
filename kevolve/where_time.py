"""Where a forward call's time goes, candidate beside eager (issue 34, "where the time goes"): the judge's profiled
call of each side, its kernels put in three classes — the candidate's own kernels (one row each), the libraries'
(cuBLAS, cuDNN, CUTLASS: a convolution or product left to them on both sides) and PyTorch's other kernels
(element-wise, norms, reductions, copies: what fusion replaces) — each with its share of its side's time and the
ratio between the sides. On the CPU the candidate's "kernels" are its extension calls (host time) and PyTorch's are
its top-level ATen compute ops; what is left of the call is the host's own work (Python, glue).

Both profiles are diagnostics of one call each (Evaluation.profile, Evaluation.ref_profile), not the timed speed:
the table says where time goes, the verdict's speedup says how fast.
"""

from __future__ import annotations

import re

from kevolve.records import Evaluation, Profile

# Vendor libraries' kernels: the same work on both sides when a candidate leaves a product or convolution to them
LIBRARY = re.compile(r"cublas|cudnn|cutlass|cute::|nvjet|^(void )?(sm\d+_|ampere_|volta_|turing_|hopper_)|gemm|gemv|"
                     r"xmma|implicit_convolve|cufft|_fft|splitKreduce|flash_fwd|fmha", re.I)
_SHOWN = 8  # the candidate's own kernels listed one by one; the rest in one row


def _classes(p: Profile) -> tuple[dict[str, float], float, float, float]:
    """(own kernels by name, library, PyTorch's other, host's other), microseconds of one call."""
    own = {k.name: k.device_time_us for k in p.kernels if k.custom}
    lib = sum(k.device_time_us for k in p.kernels if not k.custom and LIBRARY.search(k.name))
    rest = sum(k.device_time_us for k in p.kernels if not k.custom and not LIBRARY.search(k.name))
    if not any(not k.custom for k in p.kernels) and p.torch_us:  # the CPU: PyTorch's compute ops, host time
        rest = p.torch_us
    host = max(0.0, (p.total_us or 0.0) - sum(own.values()) - lib - rest)
    return own, lib, rest, host


def rows(ev: Evaluation) -> list[tuple[str, str, str, str]]:
    """(part, eager, candidate, eager / candidate) per class, times in ms of one call with their share; [] without
    both profiles."""
    cand, ref = ev.profile, ev.ref_profile
    if cand is None or ref is None:
        return []
    c_own, c_lib, c_rest, c_host = _classes(cand)
    _, r_lib, r_rest, r_host = _classes(ref)
    c_tot = sum(c_own.values()) + c_lib + c_rest + c_host
    r_tot = r_lib + r_rest + r_host
    if c_tot <= 0 or r_tot <= 0:
        return []

    def cell(us: float | None, total: float) -> str:
        return "—" if us is None or us <= 0 else f"{us / 1e3:.4f} ms ({100 * us / total:.0f}%)"

    def ratio(r: float | None, c: float | None) -> str:
        return f"{r / c:.2f}x" if r and c and r > 0 and c > 0 else "—"

    out = [("library kernels (cuBLAS, cuDNN, CUTLASS)", cell(r_lib, r_tot), cell(c_lib, c_tot), ratio(r_lib, c_lib))]
    out = out if r_lib or c_lib else []  # none on either side (the CPU, an element-wise problem): no row
    out += [("PyTorch's other kernels" if cand.kernels and any(not k.custom for k in cand.kernels + ref.kernels)
            else "PyTorch's compute ops", cell(r_rest, r_tot), cell(c_rest, c_tot), ratio(r_rest, c_rest))]
    mine = sorted(c_own.items(), key=lambda kv: -kv[1])
    own_total = sum(c_own.values())
    out.append((f"the candidate's own kernels ({len(mine)})", "—", cell(own_total, c_tot),
                ratio(r_rest, own_total + c_rest) if own_total else "—"))
    out += [(f"  {name[:60]}", "", cell(us, c_tot), "") for name, us in mine[:_SHOWN]]
    if len(mine) > _SHOWN:
        out.append((f"  {len(mine) - _SHOWN} more", "", cell(sum(us for _, us in mine[_SHOWN:]), c_tot), ""))
    if max(r_host / r_tot, c_host / c_tot) >= 0.01:
        out.append(("host work outside kernels", cell(r_host, r_tot), cell(c_host, c_tot), ratio(r_host, c_host)))
    out.append(("total (one profiled call)", cell(r_tot, r_tot), cell(c_tot, c_tot), ratio(r_tot, c_tot)))
    return [tuple(c.replace("|", "/") for c in row) for row in out]  # type: ignore[misc]


def markdown(ev: Evaluation) -> str:
    """rows() as a report.md section ("" without both profiles)."""
    got = rows(ev)
    if not got:
        return ""
    lines = ["## Where the time goes", "", "The judge's profiled call of the winner beside eager's: kernels by who "
             "wrote them; the candidate's own kernels' ratio is against eager's kernels they and PyTorch's remaining "
             "ones replace (sandbox profiles of one call each; the speedup above is the timed one).", "",
             "| part | eager | candidate | eager / candidate |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in got]
    return "\n".join(lines) + "\n"


__all__ = ["LIBRARY", "markdown", "rows"]
