#!/usr/bin/env bash
# Issue 36's two-GPU acceptance in one device call (kind nvidia-h200-x2, carry [".whl", "runs/lbmix"]):
#   bash scripts/gpu_two_lanes.sh
# 1. every candidate of the set built ahead into one cache (scripts/prebuild_set.py, all cores): the lanes then
#    measure evaluations, not compilers, and the two runs find the same cache;
# 2. `kevolve bench` over the set on one GPU (--gpus 0), then on two (--gpus 0,1), each for the same budget, both on
#    that build cache with eager re-measured (--baselines live) and problem data prepared anew (nothing else kept);
# 3. evaluations per minute of each, the ratio (target >= 1.8), verdicts. Files: run.log, two-lanes.md, the work
#    folder's tarball in $OUT. Environment: LIMIT (s, default 570), SET (default runs/lbmix, made by
#    scripts/make_leaderboard_mix.py), WORK (runs/lanes-work), GPUS2 (default 0,1).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; T0=$SECONDS
LIMIT=${LIMIT:-570}; SET=${SET:-runs/lbmix}; WORK=${WORK:-runs/lanes-work}; GPUS2=${GPUS2:-0,1}
[[ $LIMIT =~ ^[0-9]+$ ]] || { echo "error: LIMIT must be whole seconds, not $LIMIT" >&2; exit 2; }
for f in "$SET/solutions" "$SET/kernelbench"; do
  [ -e "$f" ] || { echo "error: $f: no such file or folder (carry $SET, made by scripts/make_leaderboard_mix.py)" >&2; exit 2; }
done
ls .whl/*.whl >/dev/null 2>&1 || { echo "error: no .whl/*.whl (carry .whl, made by scripts/fetch_gpu_wheels.sh)" >&2; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KEVOLVE_WARM=0 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
[ -x /opt/gcc/bin/gcc ] && export CC=/opt/gcc/bin/gcc
deb=$(ls .whl/deb/bubblewrap*.deb 2>/dev/null | head -1)
if [ -n "$deb" ]; then
  [ -x /tmp/bwrap/usr/bin/bwrap ] || bash scripts/unpack_bwrap.sh "$deb" /tmp/bwrap >/dev/null
  export KEVOLVE_BWRAP=/tmp/bwrap/usr/bin/bwrap
fi
ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())')
{
  echo "== $(date -u +%FT%TZ) two lanes, LIMIT=$LIMIT SET=$SET GPUS2=$GPUS2, $ngpu GPUs, $(nproc) cores"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} 2>&1 | tee -a "$OUT/run.log"
[ "$ngpu" -ge 2 ] || { echo "error: $ngpu GPU(s) here: ask for kind nvidia-h200-x2" | tee -a "$OUT/run.log"; exit 2; }
rm -rf "$WORK"; mkdir -p "$WORK"
left() { echo $((LIMIT - (SECONDS - T0) - ${1:-0})); }
echo "== prebuild, at most $(left 200) s" | tee -a "$OUT/run.log"
timeout -s KILL "$(left 200)" python3 -P scripts/prebuild_set.py --solutions "$SET/solutions" \
  --cache-dir "$WORK/kevolve-cache" 2>&1 | tail -12 | tee -a "$OUT/run.log"
budget=$(( ($(left 30)) / 2 ))
TP=(python3 -P scripts/bench_throughput.py --kernelbench "$SET/kernelbench" --solutions "$SET/solutions" --work "$WORK"
    --phase kevolve-warm --budget-s "$budget" --bench-arg=--timings --bench-arg=--no-archive
    --bench-arg=--baselines --bench-arg=live)
for lanes in 1 2; do
  gpus=0; [ "$lanes" = 2 ] && gpus=$GPUS2
  echo "== kevolve bench, --gpus $gpus, at most $budget s" | tee -a "$OUT/run.log"
  timeout -s KILL "$((budget + 60))" "${TP[@]}" --tag "lanes$lanes" --gpus "$gpus" 2>&1 | grep -E "^kevolve " | tee -a "$OUT/run.log"
done
python3 - "$WORK" <<'PY' 2>&1 | tee "$OUT/two-lanes.md" | tee -a "$OUT/run.log"
import json, sys
from pathlib import Path
work = Path(sys.argv[1])
runs = {n: json.loads((work / f"kevolve-lanes{n}.json").read_text()) for n in (1, 2) if (work / f"kevolve-lanes{n}.json").exists()}
print("| lanes | evaluations | wall s | per minute | verdicts | bench rc |\n|---|---|---|---|---|---|")
rate = {}
for n, r in runs.items():
    rate[n] = 60.0 * r["evaluations"] / r["wall_s"] if r["wall_s"] else 0.0
    print(f"| {n} | {r['evaluations']} | {r['wall_s']:.1f} | {rate[n]:.1f} | "
          f"{', '.join(f'{k} {v}' for k, v in r['statuses'].items())} | {r['returncode']} |")
if rate.get(1) and 2 in rate:
    print(f"\ntwo lanes / one: {rate[2] / rate[1]:.2f}x evaluations per minute (target >= 1.8)")
for n, r in runs.items():
    bad = {k: v["reason"][:120] for k, v in r["per_candidate"].items() if v["status"] != "ok"}
    print(f"\nlanes {n}, not ok: " + ("; ".join(f"{k}: {v}" for k, v in bad.items()) or "none"))
PY
tar -czf "$OUT/lanes-work.tar.gz" --exclude=kevolve-cache --exclude='*.so' -C "$(dirname "$WORK")" "$(basename "$WORK")"
echo "== done at $((SECONDS - T0)) s" | tee -a "$OUT/run.log"
