#!/usr/bin/env bash
# GPU runs for `kevolve bench` (issue 7): one device call per step, on an H100.
# Carry: .whl (wheels incl. a kevolve wheel built from this tree) and runs/kernelbench-upstream
# (KernelBench's KernelBench/ and src/ plus published-h100/, see the report of issue 7).
# Steps that say "repeat" keep their state in runs/ (kept between calls on a warm machine) and
# continue where the last call stopped; run them until they say they are done.
#
#   bash scripts/bench_gpu.sh baselines           # eager, all level 1-2 problems (repeat)
#   bash scripts/bench_gpu.sh baselines-compile   # eager + torch.compile, every 10th problem (repeat)
#   bash scripts/bench_gpu.sh throughput-cold     # kevolve bench, empty caches, 14 level-1 problems
#   bash scripts/bench_gpu.sh throughput-warm     # the same again on warm caches
#   bash scripts/bench_gpu.sh throughput-kb       # KernelBench's harness, same candidates (repeat)
#                                                 # (extra arguments go to scripts/bench_throughput.py)
#   bash scripts/bench_gpu.sh throughput-report   # the side-by-side table
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
KB=runs/kernelbench-upstream
SAMPLE=1,11,21,31,41,51,61,71,81,91
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
bench() { timeout "${LIMIT:-570}" python3 -P -m kevolve.cli bench "$@"; }
tp() { timeout "${LIMIT:-590}" python3 -P scripts/bench_throughput.py --kernelbench "$KB" --out "$OUT/throughput" "$@"; }
case "${1:-}" in
  baselines)
    bench baselines --suite "$KB" --level 1,2 --device cuda --compile-baseline off --trials 100 --max-timing-s 3 \
      --input-draws 1 --cache-dir runs/bench-cache --published "$KB/published-h100" --out "$OUT/baselines_l12_eager.json"
    echo "rc $? (124: time limit, call again to continue)";;
  baselines-compile)
    bench baselines --suite "$KB" --level 1,2 --problems "$SAMPLE" --device cuda --compile-baseline on --trials 100 \
      --max-timing-s 3 --input-draws 1 --cache-dir runs/bench-cache --published "$KB/published-h100" \
      --out "$OUT/baselines_l12_compile_sample.json"
    echo "rc $? (124: time limit, call again to continue)";;
  throughput-cold) tp --phase kevolve-cold "${@:2}";;
  throughput-warm) tp --phase kevolve-warm "${@:2}";;
  throughput-kb) tp --phase kernelbench --kb-budget-s 400 "${@:2}";;  # add --kb-build-cache for its CPU pre-compile pool
  throughput-report) tp --phase report "${@:2}";;
  *) echo "usage: bash scripts/bench_gpu.sh baselines|baselines-compile|throughput-cold|throughput-warm|throughput-kb|throughput-report"; exit 2;;
esac
