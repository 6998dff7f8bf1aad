#!/usr/bin/env bash
# One device call: judge switches side by side (each side a judge environment: SIDES, space-separated VAR=VALUE
# words, one per side, several joined by "+"), default each call of a timed GPU batch alone on the device (clock.FENCE, KEVOLVE_GPU_FENCE)
# against the calls back to back: honest kernels' speeds, and work on streams that never wait for the caller's.
# Usage (device tool, carry .whl): [SIDES="KEVOLVE_GPU_NET=0 KEVOLVE_GPU_NET=1+KEVOLVE_GPU_TIMING_DRAWS=1024,2048"]
#   [ROWS="problem:solution …"]
#   bash scripts/gpu_fence.sh [pytest node ids after]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KEVOLVE_CACHE_DIR=/tmp/kc
P=$R/tests/fixtures/problems S=$R/tests/gpu/solutions
row() {  # side problem solution
  local tag="$2.$3.${1//[^A-Za-z0-9]/_}"
  # shellcheck disable=SC2086
  (cd /tmp && env ${1//+/ } python3 -P -m kevolve.cli eval "$P/$2.py" "$S/$3.py" --device cuda --json --seed 7 \
    --compile-baseline off) > "$OUT/$tag.json" 2> "$OUT/$tag.err"
  python3 - "$OUT/$tag.json" "$1" "$2" "$3" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"| {sys.argv[3]} | {sys.argv[4]} | {sys.argv[2]} | no JSON ({e}) | | | | |"); sys.exit()
t, rt = r.get("timing") or {}, r.get("ref_timing") or {}
f = lambda v: "-" if v is None else f"{v:.4f}"
print(f"| {sys.argv[3]} | {sys.argv[4]} | {sys.argv[2]} | {r.get('status')}: {str(r.get('reason') or '')[:70]} | "
      f"{f(r.get('speedup'))} | {f(t.get('median_ms'))} ({f(t.get('iqr_ms'))}) | {f(rt.get('median_ms'))} | {t.get('trials')} | {r.get('wall_s', 0):.1f} |")
PY
}
echo "| problem | candidate | side | verdict | vs eager | cand ms (iqr) | eager ms | batches | eval s |"
echo "|---|---|---|---|---|---|---|---|---|"
ROWS=${ROWS:-"relu:relu_cupy relu_wide:relu_cupy relu_2k:relu_cupy relu_big:relu_cupy fused_chain:fused_chain_cupy
  exp_wide:exp_cupy cumprod:cumprod_cupy relu_2k:relu_fewblocks relu_2k:relu_unordered_start relu_big:relu_fewblocks
  relu_big:relu_unordered_start relu_big:relu_side_stream_pad relu_big:relu_side_stream"}
for F in ${SIDES:-KEVOLVE_GPU_FENCE=none KEVOLVE_GPU_FENCE=full}; do
  for ps in $ROWS; do
    row "$F" "${ps%%:*}" "${ps##*:}"
  done
done
tar -C "$OUT" -czf "$OUT/side_by_side.tgz" --exclude=side_by_side.tgz . 2>/dev/null  # the tool brings back few files
if [ $# -gt 0 ]; then
  python3 -P -m pytest -q "$@" -p no:cacheprovider 2>&1 | tee "$OUT/pytest_rest.log" | tail -15
fi
