#!/usr/bin/env bash
# One device call: what making timing draws again costs on the GPU (draws.REMADE_TIMING), against the pool's
# rotation, on problems whose draws are too large to keep 8 timing draws. Usage (device tool, carry .whl):
#   bash scripts/gpu_remake.sh [pytest node ids to run after]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KEVOLVE_CACHE_DIR=/tmp/kc
P=$R/tests/fixtures/problems S=$R/tests/gpu/solutions
row() {  # label problem solution remade
  local s e; s=$(date +%s.%N)
  (cd /tmp && KEVOLVE_REMADE_TIMING=$4 python3 -P -m kevolve.cli eval "$2" "$3" --device cuda --json --seed 7) \
    > "$OUT/$1.json" 2> "$OUT/$1.err"
  e=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$s" "$(date +%s.%N)")
  python3 - "$OUT/$1.json" "$1" "$e" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"| {sys.argv[2]} | no JSON ({e}) | | | {float(sys.argv[3]):.1f} |"); sys.exit()
t, ph = r.get("timing") or {}, r.get("phase_s") or {}
print(f"| {sys.argv[2]} | {r.get('status')}: {str(r.get('reason') or '')[:60]} | {r.get('speedup')} | "
      f"{t.get('trials')} ({t.get('stopped')}) | {ph.get('ref.reference_timing_draws', 0):.2f} | {ph.get('timing', 0):.1f} | "
      f"{r.get('wall_s'):.1f} / {float(sys.argv[3]):.1f} |")
PY
}
echo "| run | verdict | vs eager | trials (stop) | timing draws s | timing s | eval wall s / process s |"; echo "|---|---|---|---|---|---|---|"
for rep in ${REPS:-1 2}; do
  row relu_big_pool_$rep "$P/relu_big.py" "$S/relu_cupy.py" cpu
  row relu_big_remade_$rep "$P/relu_big.py" "$S/relu_cupy.py" cpu,cuda
done
row memo_pool "$P/relu_big.py" "$S/memo_pool_cupy.py" cpu
row memo_remade "$P/relu_big.py" "$S/memo_pool_cupy.py" cpu,cuda
if [ $# -gt 0 ]; then
  python3 -P -m pytest -q "$@" -p no:cacheprovider 2>&1 | tee "$OUT/pytest_rest.log" | tail -15
fi
