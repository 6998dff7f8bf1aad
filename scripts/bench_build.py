"""Where a `load_inline` build spends its time, and what each build-time lever buys (GPU machine).

    python3 -P scripts/bench_build.py --candidate scripts/kernelbench_level1_solutions/level_1_problem_1_sample_0_kernel.py --out $OUT/build

1. `load_inline` exactly as a KernelBench candidate calls it (fresh build directory, torch's default
   flags): total wall and ninja's per-step log (host .cpp, device .cu, link).
2. The same compile commands (read from that build's build.ninja), rerun one at a time with one
   lever changed: host optimisation level, one target architecture, a precompiled header for
   `torch/extension.h`, lighter torch headers in the .cu, nvcc's own phase times (`--time`).
   The variants run concurrently (each compile is one process; the machine has 16 cores).
Prints a table and writes build.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
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
    return v if cu else {k: c for k, c in v.items() if not k.startswith("cu:")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidate", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("runs/bench_build"))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
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
    (a.out / "build.json").write_text(json.dumps(res, indent=1))
    print("| step | wall s | ok |\n|---|---|---|")
    for k, r in results.items():
        print(f"| {k} | {r['wall_s']} | {r['ok']} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
