"""Where a `load_inline` build spends its time, and what each build-time lever buys (GPU machine).

    python3 -P scripts/bench_build.py --candidate scripts/kernelbench_level1_solutions/level_1_problem_1_sample_0_kernel.py --out $OUT/build

1. `load_inline` exactly as a KernelBench candidate calls it (fresh build directory, torch's default
   flags): total wall and ninja's per-step log (host .cpp, device .cu, link).
2. The same compile commands (read from that build's build.ninja), rerun one at a time with one
   lever changed: host optimisation level, one target architecture, a precompiled header for
   `torch/extension.h`, lighter torch headers in the .cu, nvcc's own phase times (`--time`).
   The variants run concurrently (each compile is one process; the machine has 16 cores).
Prints a table and writes build.json.

With --service: N candidates built cold through kevolve's build service (sandbox/build/service.py) and,
side by side in the same run, through plain `load_inline` (torch's defaults, each in its own
process), W at a time; then the service again with its precompiled headers ready. Per candidate:
seconds, the .cu recipe (slim / fallback), whether main.cpp used a PCH; the total wall of each pass.
Candidates: the level-1 solutions beside this script and the C++ fixtures (C++ only without CUDA).

    python3 -P scripts/bench_build.py --service --workers 7 --out $OUT/build   # one H100: ~5 min
    python3 -P scripts/bench_build.py --service --workers 1 --out runs/build   # CPU: C++ fixtures

With --order: the same corpus built cold through the service three times, the precompiled headers submitted before
every candidate, after the first --first of them, and ahead of them on all workers but one (the bench's order); when
the first candidate is built, when all are.

    python3 -P scripts/bench_build.py --order --workers 2 --first 1 --out runs/build   # CPU: C++ fixtures, ~5 min
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def capture_load_inline(path: Path) -> dict:
    """Run the candidate's module with load_inline replaced by a recorder (its arguments, no build)."""
    from torch.utils import cpp_extension

    seen: dict = {}

    def record(name, cpp_sources, cuda_sources=None, functions=None, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.update(name=name, cpp_sources=cpp_sources, cuda_sources=cuda_sources, functions=functions, kw=kw)

        class _Any:
            def __getattr__(self, _n):  # noqa: ANN001, ANN204
                return lambda *a, **k: None
        return _Any()

    original = cpp_extension.load_inline
    cpp_extension.load_inline = record
    src = path.read_text()
    code = compile(src, str(path), "exec")
    try:
        exec(code, {"__name__": "captured"})  # noqa: S102 - a benchmark over the project's own solutions
    except Exception:  # noqa: BLE001 - module code after load_inline may fail on the dummy
        pass
    finally:
        cpp_extension.load_inline = original
    if not seen:
        raise SystemExit(f"{path}: no load_inline call")
    return seen


def build_default(args: dict, root: Path) -> dict:
    from torch.utils import cpp_extension

    d = root / "default"
    d.mkdir(parents=True)
    kw = {k: v for k, v in args["kw"].items() if k not in ("verbose", "build_directory")}
    t0 = time.monotonic()
    cpp_extension.load_inline(f"bench_default_{os.getpid()}", args["cpp_sources"], args["cuda_sources"],
                              functions=args["functions"], build_directory=str(d), verbose=False, **kw)
    wall = time.monotonic() - t0
    steps = {}
    log = d / ".ninja_log"
    if log.exists():
        for line in log.read_text().splitlines()[1:]:
            start, end, _mt, target, _h = line.split("\t")
            steps[target] = (int(end) - int(start)) / 1e3
    return {"wall_s": wall, "steps_s": steps, "dir": str(d)}


def ninja_commands(build_dir: Path) -> dict[str, str]:
    """The expanded compile command for each object in build.ninja."""
    text = (build_dir / "build.ninja").read_text()
    var = dict(re.findall(r"^(\w+) = (.*)$", text, re.M))
    rules = dict(re.findall(r"^rule (\w+)\n(?:  .*\n)*?  command = (.*)$", text, re.M))
    out = {}
    for target, rule, src in re.findall(r"^build (\S+): (\w+) (\S+)$", text, re.M):
        if rule not in rules:
            continue
        cmd = rules[rule].replace("$in", src).replace("$out", target)
        for _ in range(3):
            cmd = re.sub(r"\$(\w+)", lambda m: var.get(m.group(1), ""), cmd)
        out[target] = cmd
    return out


def timed(cmd: str, cwd: Path) -> dict:
    t0 = time.monotonic()
    r = subprocess.run(cmd, shell=True, cwd=cwd, capture_output=True, text=True)
    return {"wall_s": round(time.monotonic() - t0, 2), "ok": r.returncode == 0, "err": r.stderr[-600:]}


def variants(build_dir: Path, work: Path) -> dict[str, str]:
    cmds = ninja_commands(build_dir)
    cu = next((v for k, v in cmds.items() if k.endswith(".cuda.o")), "")
    cpp = next(v for k, v in cmds.items() if k.endswith("main.o"))
    cu_src = build_dir / "cuda.cu"
    light = work / "cuda_light.cu"
    if cu:
        light.write_text(cu_src.read_text().replace("#include <torch/extension.h>",
                                                    "#include <torch/types.h>\n#include <ATen/ATen.h>"))
    pch_dir = work / "pch" / "torch"
    pch_dir.mkdir(parents=True)
    torch_inc = next(m for m in re.findall(r"-isystem (\S+)", cpp) if m.endswith("/include"))
    # A second `#include <torch/extension.h>` (the candidate's own, after load_inline's implicit
    # one) finds the .gch dir first and needs the real header beside it; #pragma once skips it.
    (pch_dir / "extension.h").symlink_to(Path(torch_inc) / "torch" / "extension.h")
    def out(cmd: str, name: str, extra: str = "") -> str:
        return re.sub(r" -o \S+", f" -o {name}", cmd, count=1) + extra

    src_re = re.compile(r" -c \S+")
    pch_cmd = src_re.sub(f" -x c++-header -c {torch_inc}/torch/extension.h", cpp, count=1)
    v = {
        "cu: as built": out(cu, "v_cu0.o"),
        "cu: nvcc --time": out(cu, "v_cu1.o", f" --time {work}/nvcc_time.csv"),
        "cu: host -O0": out(cu, "v_cu2.o", " -Xcompiler -O0"),
        "cu: light headers": out(cu.replace(str(cu_src), str(light)), "v_cu3.o"),
        "cu: light headers, host -O0": out(cu.replace(str(cu_src), str(light)), "v_cu4.o", " -Xcompiler -O0"),
        "cpp: as built": out(cpp, "v_cpp0.o"),
        "cpp: -O0": out(cpp, "v_cpp1.o", " -O0"),
        "pch: build extension.h.gch": out(pch_cmd, f"{pch_dir}/extension.h.gch"),
        "cpp: with pch": out(cpp.replace(" -c ", f" -I{work}/pch -Winvalid-pch -c ", 1), "v_cpp2.o"),
    }
    if cu:
        from kevolve.sandbox.build.recipe import ensure_shim

        shim = ensure_shim(work)
        v["cu: kevolve slim headers"] = out(cu.replace(" -c ", f" -I{shim} -c ", 1), "v_cu5.o",
                                            f" --time {work}/nvcc_time_slim.csv")
    return v if cu else {k: c for k, c in v.items() if not k.startswith("cu:")}


_ROOT = Path(__file__).resolve().parent.parent
_PLAIN = """
import json, sys, time
from torch.utils.cpp_extension import load_inline
s = json.loads(sys.argv[1])
t0 = time.monotonic()
load_inline(s["name"], list(s["cpp_sources"]), list(s["cuda_sources"]) or None,
            functions=None if s["functions"] is None else {f: d for f, d in s["functions"]},
            extra_cflags=list(s["extra_cflags"]), extra_cuda_cflags=list(s["extra_cuda_cflags"]),
            extra_ldflags=list(s["extra_ldflags"]), with_cuda=s["with_cuda"],
            with_pytorch_error_handling=s["with_pytorch_error_handling"], build_directory=sys.argv[2])
print(json.dumps({"seconds": time.monotonic() - t0}))
"""


def corpus(cuda: bool) -> dict[str, object]:
    """label -> ExtensionSpec for each candidate (read statically, as the service reads them)."""
    from kevolve.sandbox.build.extensions import extract

    files = sorted((_ROOT / "tests" / "fixtures" / "solutions").glob("*_cpp.py"))
    if cuda:
        files = sorted((_ROOT / "scripts" / "kernelbench_level1_solutions").glob("*.py")) + files
    return {f.stem: spec for f in files for spec in extract(f.read_text()).specs}


def plain_builds(specs: dict[str, object], workers: int, root: Path) -> tuple[dict[str, dict], float]:
    """Each spec through torch's own load_inline in a fresh process (W at a time); total wall."""
    def one(label: str) -> dict:
        d = root / label
        d.mkdir(parents=True)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-c", _PLAIN, specs[label].model_dump_json(), str(d)],  # type: ignore[attr-defined]
                           capture_output=True, text=True)
        ok = r.returncode == 0
        inner = json.loads(r.stdout.strip().splitlines()[-1])["seconds"] if ok else time.monotonic() - t0
        return {"ok": ok, "seconds": round(inner, 1), "err": "" if ok else r.stderr[-400:]}

    t0 = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        out = dict(zip(specs, pool.map(one, specs), strict=True))
    return out, time.monotonic() - t0


_WARM = {"default": ((), ("-O3",)), "plain": ((),), "none": ()}


def service_builds(specs: dict[str, object], workers: int, cache: Path, isolation: str,
                   warm: str = "default", first: int = 0, front: int | None = None) -> tuple[dict[str, dict], float]:
    """All specs submitted at once to a BuildService on every core: the first `first` of them, then `front` of the
    PCHs (None: all), then the rest of the specs, then the other PCHs; total wall. Each candidate's `done_s`: from
    the start until its build was done."""
    from kevolve.sandbox.build.service import BuildService, gpu_arch
    from kevolve.sandbox.config import Isolation
    from kevolve.sandbox.build.recipe import BuildTarget

    t0 = time.monotonic()
    svc = BuildService(cache, BuildTarget.current(gpu_arch("cuda:0")), workers=workers,
                       cores=set(os.sched_getaffinity(0)), isolation=Isolation(isolation))
    try:
        labels, flag_sets = list(specs), _WARM[warm]
        front = len(flag_sets) if front is None else front
        futures = {label: svc.submit(specs[label]) for label in labels[:first]}  # type: ignore[arg-type]
        pch = svc.warm(flag_sets[:front])
        futures |= {label: svc.submit(specs[label]) for label in labels[first:]}  # type: ignore[arg-type]
        pch += svc.warm(flag_sets[front:])
        done: dict[str, float] = {}
        for label, fut in futures.items():
            fut.add_done_callback(lambda _f, label=label: done.setdefault(label, time.monotonic() - t0))
        out = {}
        for label, fut in futures.items():
            r = fut.result()
            out[label] = {"ok": r.ok, "seconds": round(r.seconds, 1), "recipe": r.recipe or "c++", "pch": r.pch,
                          "queued_s": round(r.queued_s, 1), "done_s": round(done.get(label, 0.0), 1),
                          "status": r.status.value, "phases": {k: round(v, 1) for k, v in r.phases.items()},
                          "err": r.log_tail[-400:]}
        wall = time.monotonic() - t0
        for f in pch:
            f.result()
    finally:
        svc.close()
    return out, wall


def order_main(a: argparse.Namespace) -> None:
    """Cold service builds, the precompiled headers submitted before every candidate and after the first --first
    of them: when the first candidate is built, when all are (docs/BENCHMARKS.md, twenty-eighth session)."""
    import torch

    specs = corpus(torch.cuda.is_available())
    res: dict = {"cores": len(os.sched_getaffinity(0)), "workers": a.workers, "torch": torch.__version__, "runs": []}
    layouts = {"first": (0, None), f"after {a.first}": (a.first, None), "all workers but one": (0, a.workers - 1)}
    for rep in range(a.repeat):
        for name, (first, front) in layouts.items():
            if a.layout and name != a.layout:
                continue
            work = Path(tempfile.mkdtemp(prefix="kevolve-bench-order-"))
            try:
                out, wall = service_builds(specs, a.workers, work / "cache", a.isolation, a.warm, first, front)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            row = {"repeat": rep, "pch": name, "wall_s": round(wall, 1),
                   "first_built_s": min(o["done_s"] for o in out.values()), "builds": out}
            res["runs"].append(row)
            print(f"PCH {row['pch']}: first candidate built at {row['first_built_s']} s, all at {wall:.1f} s; "
                  + ", ".join(f"{k} {o['done_s']} s ({o['seconds']} s, PCH {o['pch']})" for k, o in out.items()),
                  flush=True)
    (a.out / "build_order.json").write_text(json.dumps(res, indent=1))


def service_main(a: argparse.Namespace) -> None:
    import torch

    cuda = torch.cuda.is_available()
    specs = corpus(cuda)
    work = Path(tempfile.mkdtemp(prefix="kevolve-bench-service-"))
    res: dict = {"cores": len(os.sched_getaffinity(0)), "workers": a.workers, "cuda": cuda,
                 "device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__}
    try:
        cache = work / "cache"
        res["service_cold"], res["service_cold_wall_s"] = service_builds(specs, a.workers, cache, a.isolation, a.warm)
        print(f"service, cold: {res['service_cold_wall_s']:.1f} s", flush=True)
        shutil.rmtree(cache / "extensions")  # keep pch/ and shim/: the steady state
        res["service_pch"], res["service_pch_wall_s"] = service_builds(specs, a.workers, cache, a.isolation, a.warm)
        print(f"service, PCH ready: {res['service_pch_wall_s']:.1f} s", flush=True)
        if not a.skip_plain:
            res["plain"], res["plain_wall_s"] = plain_builds(specs, a.workers, work / "plain")
            print(f"plain load_inline: {res['plain_wall_s']:.1f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (a.out / "build_service.json").write_text(json.dumps(res, indent=1))
    plain = res.get("plain", {})
    print(f"\n{res['device']}, {res['cores']} cores, W={a.workers}, torch {res['torch']}")
    print("| candidate | plain load_inline s | service cold s | service, PCH ready s | .cu recipe | PCH cold/ready | ok |")
    print("|---|---|---|---|---|---|---|")
    for label in specs:
        c, w, p = res["service_cold"][label], res["service_pch"][label], plain.get(label, {})
        print(f"| {label} | {p.get('seconds', '-')} | {c['seconds']} | {w['seconds']} | {w['recipe']} | {c['pch']}/{w['pch']} |"
              f" {p.get('ok', '-')}/{c['ok']}/{w['ok']} |")
    print(f"| **total wall** | {res.get('plain_wall_s', 0):.1f} | {res['service_cold_wall_s']:.1f} |"
          f" {res['service_pch_wall_s']:.1f} | | | |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidate", type=Path, help="phase mode: one solution file")
    ap.add_argument("--service", action="store_true", help="service mode: the corpus, service vs plain load_inline")
    ap.add_argument("--workers", type=int, default=max(1, len(os.sched_getaffinity(0)) // 2))
    ap.add_argument("--isolation", default="auto", choices=["auto", "none", "bwrap"])
    ap.add_argument("--warm", default="default", choices=sorted(_WARM),
                    help="service mode: precompiled headers built first (default: no flags and -O3)")
    ap.add_argument("--skip-plain", action="store_true", help="service mode: no plain load_inline pass")
    ap.add_argument("--order", action="store_true", help="order mode: cold service builds with the precompiled "
                    "headers submitted first, and after the first --first candidates")
    ap.add_argument("--first", type=int, default=1, help="order mode: candidates submitted ahead of the headers")
    ap.add_argument("--repeat", type=int, default=1, help="order mode: how many times each order runs")
    ap.add_argument("--layout", default=None, choices=["first", "after 1", "all workers but one"],
                    help="order mode: only this order (default: all three)")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_build"))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if a.service:
        return service_main(a)
    if a.order:
        return order_main(a)
    if a.candidate is None:
        ap.error("--candidate (phase mode) or --service")
    args = capture_load_inline(a.candidate)
    work = Path(tempfile.mkdtemp(prefix="kevolve-bench-build-"))
    res = {"candidate": str(a.candidate), "cores": len(os.sched_getaffinity(0)),
           "TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST")}
    res["default"] = build_default(args, work)
    print(f"default load_inline: {res['default']['wall_s']:.1f} s  steps {res['default']['steps_s']}", flush=True)
    build_dir = Path(res["default"]["dir"])
    vs = variants(build_dir, work)
    pch_cmd = vs.pop("pch: build extension.h.gch")
    with_pch = vs.pop("cpp: with pch")
    with ThreadPoolExecutor(len(vs) + 1) as pool:
        pch_future = pool.submit(timed, pch_cmd, build_dir)
        futures = {k: pool.submit(timed, c, build_dir) for k, c in vs.items()}
        results = {k: f.result() for k, f in futures.items()}
        results["pch: build extension.h.gch"] = pch_future.result()
    results["cpp: with pch"] = timed(with_pch, build_dir)
    res["variants"] = results
    res["commands"] = {**vs, "pch": pch_cmd, "cpp: with pch": with_pch}
    tfile = work / "nvcc_time.csv"
    res["nvcc_time_csv"] = tfile.read_text() if tfile.exists() else ""
    slim = work / "nvcc_time_slim.csv"
    res["nvcc_time_slim_csv"] = slim.read_text() if slim.exists() else ""
    (a.out / "build.json").write_text(json.dumps(res, indent=1))
    print("| step | wall s | ok |\n|---|---|---|")
    for k, r in results.items():
        print(f"| {k} | {r['wall_s']} | {r['ok']} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
