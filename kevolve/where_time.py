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

import difflib
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
    if split := parts(ev):
        lines += ["", "By part: the model split where both sides run the same kernel; each part is what eager ran "
                  "there and what the candidate runs instead.", "",
                  "| part: the candidate's kernels | eager's kernels | share of eager | eager / candidate ms | speedup |",
                  "|---|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in split]
    return "\n".join(lines) + "\n"


def short(name: str) -> str:
    """A kernel's name without its template arguments, parameters and namespaces: `batch_norm_transform_input_kernel`."""
    base = re.sub(r"^void\s+", "", name).split("(")[0]
    depth, out = 0, []
    for ch in base:  # drop <...> however deep
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">" and depth > 0
    head = "".join(out).rsplit("::", 1)[-1].strip()[:48] or name[:48]
    what = re.search(r"(\w*[Ff]unctor\w*)", name) if "elementwise" in head else None  # whose element-wise kernel
    return f"{head}[{what.group(1)[:32]}]" if what else head


def _seq(p: Profile) -> list[tuple[str, float, bool]]:
    """(name, µs, custom) in start order; [] where the profile has no order (the CPU, an old record, a bad index)."""
    try:
        return [(p.kernels[i].name, us, p.kernels[i].custom) for i, us in p.order]
    except (IndexError, TypeError):
        return []


def _names(seq: list[tuple[str, float, bool]], lo: int, hi: int) -> str:
    counts: dict[str, int] = {}
    for name, _, _ in seq[lo:hi]:
        counts[short(name)] = counts.get(short(name), 0) + 1
    return ", ".join(f"{n}{f' x{c}' if c > 1 else ''}" for n, c in counts.items())


def parts(ev: Evaluation, top: int = 10) -> list[tuple[str, str, str, str, str]]:
    """(part, eager's kernels, share of eager's time, eager ms / candidate ms, speedup): the model split where the
    two sides run the same kernel (a convolution left to cuDNN, a copy): between two such kernels, what eager ran
    and what the candidate runs instead is one part. Parts by eager's time, the `top` largest; the kept kernels in one
    row. [] without both sides' kernel order (CUDA only)."""
    if ev.profile is None or ev.ref_profile is None:
        return []
    ref, cand = _seq(ev.ref_profile), _seq(ev.profile)
    if not ref or not cand:
        return []
    total = sum(us for _, us, _ in ref)
    if total <= 0:
        return []
    sm = difflib.SequenceMatcher(None, [n for n, _, _ in ref], [n for n, _, c in cand], autojunk=False)
    changed: list[tuple[str, str, float, float]] = []
    kept_r = kept_c = 0.0
    kept_n = 0
    for tag, i0, i1, j0, j1 in sm.get_opcodes():
        r_us, c_us = sum(us for _, us, _ in ref[i0:i1]), sum(us for _, us, _ in cand[j0:j1])
        if tag == "equal":
            kept_r, kept_c, kept_n = kept_r + r_us, kept_c + c_us, kept_n + (i1 - i0)
        else:
            became = _names(cand, j0, j1) or "nothing (dropped)"
            changed.append((became, _names(ref, i0, i1) or "nothing", r_us, c_us))
    changed.sort(key=lambda x: -x[2])

    def row(part: str, eager: str, r_us: float, c_us: float) -> tuple[str, str, str, str, str]:
        sp = f"{r_us / c_us:.2f}x" if r_us > 0 and c_us > 0 else "—"
        return (part.replace("|", "/"), eager.replace("|", "/"), f"{100 * r_us / total:.0f}%",
                f"{r_us / 1e3:.4f} / {c_us / 1e3:.4f}", sp)

    out = [row(f"part {k + 1}: {became}", eager, r, c) for k, (became, eager, r, c) in enumerate(changed[:top])]
    if len(changed) > top:
        rest = changed[top:]
        out.append(row(f"{len(rest)} smaller parts", "", sum(x[2] for x in rest), sum(x[3] for x in rest)))
    if kept_n:
        out.append(row(f"kept as they were ({kept_n} kernels)", "the same kernels", kept_r, kept_c))
    return out


__all__ = ["LIBRARY", "markdown", "parts", "rows", "short"]
