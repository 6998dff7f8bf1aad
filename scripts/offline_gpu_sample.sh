#!/usr/bin/env bash
# One device call (≤ ~500 s): the offline proposer on a KernelBench sample, eager and torch.compile timed
# in the same evaluations; prints the per-level summary and then a per-problem table (problem, technique
# the winner started from, its settings (vector width, unroll, one-pass or two-pass rows, split, graph …),
# speedup vs eager, vs torch.compile, roofline fraction, trials, stop reason).
#
#   device tool, carry [".whl", "runs/kernelbench-upstream"] (plus BUNDLE_IN from an earlier call):
#   bash scripts/offline_gpu_sample.sh
#
# Resumable: results go to $OUT/offline_sample.tgz after every problem; copy it into the tree as
# runs/offline_sample.tgz, carry it, and call again to continue where the time limit stopped it.
# Problems (override with L1=… L2=…): level 1 memory-bound ones (activations, softmax, norms, a sum, a
# loss) and one plain GEMM; level 2 GEMMs followed by element-wise epilogues, and one with a softmax.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SUITE=${SUITE:-runs/kernelbench-upstream}
BUNDLE_IN=${BUNDLE_IN:-runs/offline_sample.tgz}
L1=${L1:-19,21,23,24,26,36,40,47,88,94,1}
L2=${L2:-12,29,33,40,53,63,76,81,86,99}
LIMIT=${LIMIT:-470}            # seconds for both levels; a problem already started may run past it
PROBLEM_TIME=${PROBLEM_TIME:-40}
BUDGET=${BUDGET:-4}            # candidates per problem: each variant's defaults, then mutations of the best
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, cupy, triton; print('torch', torch.__version__, 'cupy', cupy.__version__, 'triton', triton.__version__)"
BUNDLE="$OUT/offline_sample.tgz"
[ -f "$BUNDLE_IN" ] && cp "$BUNDLE_IN" "$BUNDLE"
WORK=/tmp/offline_sample
common=(--suite "$SUITE" --out "$WORK" --bundle "$BUNDLE" --budget "$BUDGET" --problem-time "$PROBLEM_TIME"
        --max-timing-s 1.0 --draws 2 --timeout 150)
start=$(date +%s)
python3 -P scripts/run_offline_gpu.py "${common[@]}" --levels 1 --problems "$L1" --time-limit $((LIMIT / 2)) \
  2> "$OUT/level1.log" > /dev/null
left=$((LIMIT - ($(date +%s) - start)))
[ "$left" -gt 30 ] && python3 -P scripts/run_offline_gpu.py "${common[@]}" --levels 2 --problems "$L2" \
  --time-limit "$left" 2> "$OUT/level2.log" > /dev/null
tail -n 3 "$OUT/level1.log" "$OUT/level2.log" 2>/dev/null
python3 -P scripts/run_offline_gpu.py --suite "$SUITE" --out "$WORK" --levels 1,2 --report-only | tee "$OUT/summary.md"
