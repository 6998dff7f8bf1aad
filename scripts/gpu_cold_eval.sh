#!/usr/bin/env bash
# One device call for issue 36's cold/warm `kevolve eval` figures (H100), then tests/gpu as time allows.
# Usage (device tool, carry .whl): bash scripts/gpu_cold_eval.sh [seconds for the tests]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; R=$PWD; TEST_S=${1:-120}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nproc; uptime
(cd /tmp && timeout 240 python3 -P "$R/scripts/bench_warm_eval.py" --device cuda --problem "$R/tests/fixtures/problems/relu.py" \
  --solution "$R/tests/gpu/solutions/relu_cupy.py" --n 3 --pause 20) 2>&1 | tee "$OUT/warm_eval.md"
export KEVOLVE_CACHE_DIR=/tmp/kc KEVOLVE_WARM=0
for i in 1 2; do
  s=$(date +%s.%N)
  (cd /tmp && python3 -P -m kevolve.cli eval "$R/tests/fixtures/problems/relu.py" "$R/tests/gpu/solutions/relu_cupy.py" \
    --device cuda --timings) > "$OUT/cold_timings_$i.txt" 2>&1
  echo "cold eval $i: wall $(echo "$(date +%s.%N) - $s" | bc) s"; head -8 "$OUT/cold_timings_$i.txt"
done
grep -E "ref\.|compile|total|correctness|timing " "$OUT/cold_timings_2.txt" | grep -v "│ *│" | head -30
unset KEVOLVE_CACHE_DIR KEVOLVE_WARM
KEVOLVE_TEST_ISOLATION=none timeout "$TEST_S" python3 -P -m pytest -q tests/gpu/test_bench_gpu.py tests/gpu/test_gpu_eval.py \
  -p no:cacheprovider 2>&1 | tail -5
