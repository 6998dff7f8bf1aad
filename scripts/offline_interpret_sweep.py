#!/usr/bin/env python3
"""Every Triton product the offline proposer writes, run on the CPU under Triton's interpreter against float64.

    python scripts/offline_interpret_sweep.py --fixtures                      # tests/fixtures/offline
    python scripts/offline_interpret_sweep.py --suite .kb --levels 2 --ragged # KernelBench level 2, twice
    python scripts/offline_interpret_sweep.py --suite .kb --match Matmul --mutations 6 --out runs/sweep

For each problem whose Triton plan has a product (`--kinds mm`; add `tconv` for the convolutions): sizes
shrunk (`offline/graph/shrink.py`), then the defaults and every legal variant of `triton_sweep.variants`
rendered and run, its Triton launchers under TRITON_INTERPRET=1, compared with the module in float64 as
the judge compares (factor x eager fp32's error + floor). Prints a line per problem and the totals;
exits 1 when a variant is wrong. CPU only: a kernel right here can still be slow or wrong on a GPU.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton's first import: its language is decorated at import

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from dataclasses import asdict  # noqa: E402
from itertools import product  # noqa: E402
from pathlib import Path  # noqa: E402

from kevolve.offline.kernels_triton.triton_sweep import ProblemSweep  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "offline"
log = logging.getLogger("offline_interpret_sweep")


def problem_files(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """(name, path) of the fixtures and of the suite's selected problems."""
    pattern = re.compile(args.match) if args.match else None
    out = [(f"fixture/{p.stem}", p) for p in sorted(FIXTURES.glob("*.py"))
           if args.fixtures and (pattern is None or pattern.search(p.name))]
    if args.suite:
        from kevolve.kernelbench.suite import load_suite

        levels = [int(x) for x in args.levels.split(",")]
        out += [(sp.key, sp.path) for sp in load_suite(args.suite, levels, args.problems, args.match)
                if sp.problem is not None]
    return out


@functools.lru_cache(maxsize=2)  # a problem's two sweeps (`--ragged`) shrink it once
def _shrunk(source: str, budget: object) -> str:
    from kevolve.offline.graph.shrink import shrink

    return shrink(source, budget)  # type: ignore[arg-type]


def sweep_file(path: Path, args: argparse.Namespace, uneven: bool = False) -> tuple[str, ProblemSweep | None]:
    """('' or why it was not swept, the sweep's record) of one problem file at shrunk sizes (`uneven`: each
    then made one less where the module allows, `shrink.ragged`)."""
    from kevolve.offline.graph.shrink import Budget, ragged
    from kevolve.offline.graph.trace import TraceError
    from kevolve.offline.kernels_triton.triton_sweep import sweep_plan, triton_plan
    from kevolve.contract import load_problem, problem_from_source

    problem, kinds = load_problem(path), tuple(args.kinds.split(","))
    try:  # at the problem's own sizes first: shrinking is the slow part, and most problems have no product
        if triton_plan(problem, kinds) is None:
            return f"no Triton group of kind {args.kinds}", None
    except TraceError as e:
        return f"no plan: {str(e).splitlines()[0][:120]}", None
    try:
        small = _shrunk(problem.source, Budget(args.elements, args.flops))
        if uneven and ragged(small) == small:
            return "no top-level size can be made uneven", None
        problem = problem_from_source(ragged(small) if uneven else small, str(path))
    except Exception as e:  # noqa: BLE001 — not measurable on fake tensors: swept at its own sizes
        log.info("%s: not shrunk (%s: %s)", path, type(e).__name__, e)
    try:
        plan = triton_plan(problem, kinds)
    except TraceError as e:
        return f"no plan at shrunk sizes: {str(e).splitlines()[0][:120]}", None
    if plan is None:
        return f"no Triton group of kind {args.kinds} at shrunk sizes", None
    try:
        return "", sweep_plan(plan, args.mutations, args.seed)
    except Exception as e:  # noqa: BLE001 — the reference itself (a module this sweep cannot run) is a skip
        return f"check failed: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}", None


def line(name: str, rec: ProblemSweep) -> str:
    """One problem's summary: variants, wrong ones, the worst error against its allowance (the module's output,
    then the worst Triton launch against its own twin)."""
    out = max(rec.variants, key=lambda v: v.err_inf / v.allowed_inf)
    grp = max(rec.variants, key=lambda v: v.group_err / v.group_allowed)
    text = (f"{name}: {len(rec.variants)} variants, {len(rec.wrong)} wrong; output: worst {out.name} rel "
            f"{out.err_inf:.2e} (allowed {out.allowed_inf:.2e}, abs {out.abs_err:.2e}; eager {rec.eager_inf:.2e}); "
            f"launches: worst {grp.name} rel {grp.group_err:.2e} (allowed {grp.group_allowed:.2e}) "
            f"({rec.seconds:.1f} s)")
    return text + "".join(f"\n    WRONG {v.name} [{v.params}]: rel {v.err_inf:.3g} abs {v.abs_err:.3g} "
                          f"launch rel {v.group_err:.3g} {v.error}" for v in rec.wrong)


def summary(records: list[tuple[str, str, ProblemSweep]], skipped: int, kinds: str) -> str:
    """The totals: problems and variants swept, the largest errors, as fractions of their allowance too."""
    ran = [v for _, _, r in records for v in r.variants if not v.error]
    bad = [name for name, _, r in records if r.wrong]
    n_var = sum(len(r.variants) for _, _, r in records)
    out = max((v.err_inf / v.allowed_inf for v in ran), default=0.0)
    grp = max((v.group_err / v.group_allowed for v in ran), default=0.0)
    return (f"swept {len(records)} (problem, sizes) pairs ({skipped} skipped: no Triton {kinds} plan, or no "
            f"uneven sizes), {n_var} "
            f"variants; largest error / allowance: output {out:.3f}, launches {grp:.3f}; largest launch error "
            f"{max((v.group_err for v in ran), default=0.0):.2e}; with a wrong variant: {len(bad)} {bad}")


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixtures", action="store_true", help="sweep tests/fixtures/offline")
    ap.add_argument("--suite", default=None, help="KernelBench checkout (or a folder with level1/, level2/)")
    ap.add_argument("--levels", default="2")
    ap.add_argument("--problems", default=None, help="problem numbers, e.g. '1-10,19' (default: all)")
    ap.add_argument("--match", default=None, help="regular expression on the file name (fixtures too)")
    ap.add_argument("--kinds", default="mm", help="Triton group kinds that select a problem: mm, tconv or both")
    ap.add_argument("--mutations", type=int, default=3, help="random double mutations of the defaults")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--elements", type=int, default=1 << 18, help="shrink budget: input + parameter elements")
    ap.add_argument("--flops", type=float, default=2e7, help="shrink budget: product FLOPs of a forward")
    ap.add_argument("--ragged", action="store_true",
                    help="each problem a second time, its shrunk sizes made one less (partial tiles, masks)")
    ap.add_argument("--verbose", action="store_true", help="say why each skipped problem was skipped")
    ap.add_argument("--out", default=None, help="folder for sweep.jsonl (one record per swept problem)")
    args = ap.parse_args(argv)
    if not args.fixtures and not args.suite:
        ap.error("give --fixtures, --suite or both")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s %(message)s", stream=sys.stderr)
    log.setLevel(logging.INFO if args.verbose else logging.WARNING)
    records: list[tuple[str, str, ProblemSweep]] = []
    skipped = 0
    for (name, path), uneven in product(problem_files(args), (False, True) if args.ragged else (False,)):
        name += " (ragged)" if uneven else ""
        why, rec = sweep_file(path, args, uneven)
        if rec is None:
            skipped += 1
            log.info("%s: skipped: %s", name, why)
            continue
        records.append((name, str(path), rec))
        print(line(name, rec), flush=True)
    print(summary(records, skipped, args.kinds))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "sweep.jsonl").write_text(
            "".join(json.dumps(asdict(r) | {"key": name, "file": path}) + "\n" for name, path, r in records))
    return 1 if any(r.wrong for _, _, r in records) else 0


if __name__ == "__main__":
    raise SystemExit(main())
