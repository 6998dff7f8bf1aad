#!/usr/bin/env bash
# One device call: the judge's comparison cold and warm, torch ops against the one-pass Triton kernel
# (scripts/bench_compare.py), then cold `kevolve eval` with each (KEVOLVE_FUSED_COMPARE=1 / 0, alternated, the
# torch.compile baseline cached by a first evaluation). Usage (device tool, carry .whl): bash scripts/gpu_compare_cold.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
for n in 65536 1048576; do python3 -P scripts/bench_compare.py --first --elements $n; done 2>&1 | tee "$OUT/first.md"
for n in 1048576 16777216 268435456; do python3 -P scripts/bench_compare.py --elements $n; done 2>&1 | tee "$OUT/warm.md"
export KEVOLVE_CACHE_DIR=/tmp/kc KEVOLVE_WARM=0
ev() { (cd /tmp && python3 -P -m kevolve.cli eval "$R/tests/fixtures/problems/relu.py" "$R/tests/gpu/solutions/relu_cupy.py" \
    --device cuda --timings) > "$OUT/$1.txt" 2>&1; }
s=$(date +%s.%N); ev prime; echo "prime: $(echo "$(date +%s.%N) - $s" | bc) s"
for i in 1 2; do
  for m in 1 0; do
    s=$(date +%s.%N); KEVOLVE_FUSED_COMPARE=$m ev "cold_${m}_$i"
    echo "fused=$m run $i: wall $(echo "$(date +%s.%N) - $s" | bc) s; $(grep -m1 -A1 '^ time' "$OUT/cold_${m}_$i.txt" | tr -s ' ' | tr '\n' ' ')"
  done
done 2>&1 | tee "$OUT/cold.md"
