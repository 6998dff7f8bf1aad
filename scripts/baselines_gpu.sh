#!/usr/bin/env bash
# Eager and torch.compile baselines for every KernelBench level-1 and level-2 problem (200) on one
# GPU machine (issue 15), in calls of at most BUDGET seconds (default 520) that continue each other.
#
# Carry: .whl (wheels incl. a kevolve wheel built from this tree; skipped when kevolve is already
# importable) and runs/kernelbench-upstream (KernelBench/level1, level2 and results/timing/H100_Modal,
# KernelBench's published H100 timings). From the second call on, also the previous call's
# $OUT/baselines-cache.tar.gz, copied to runs/baselines-cache.tar.gz (or give its path first).
#
#   bash scripts/baselines_gpu.sh [PREVIOUS_CACHE.tar.gz] [extra `kevolve bench baselines` flags]
#
# Writes $OUT/baselines-cache.tar.gz (every baseline measured so far, this call's and earlier ones),
# $OUT/baselines_l12.json and .md (per problem, and the per-level comparison), and prints the
# per-level comparison table last. Exit 0: all measured; 3: time ran out first (call again with the
# tarball); 1: some problem has no baseline (its row says why).
set -uo pipefail
BUDGET=${BUDGET:-520}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
KB=runs/kernelbench-upstream
PREV=runs/baselines-cache.tar.gz
if [[ "${1:-}" == *.tar.gz ]]; then PREV=$1; shift; fi
CACHE=/tmp/kevolve-baselines-cache
if ! python3 -P -c "import kevolve" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -P -c "import torch, kevolve; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'kevolve', kevolve.__file__)"
[ -d "$KB/KernelBench/level1" ] || { echo "no KernelBench suite at $KB (carry runs/kernelbench-upstream)"; exit 1; }
rm -rf "$CACHE"; mkdir -p "$CACHE"
if [ -f "$PREV" ]; then
  tar -xzf "$PREV" -C "$CACHE" || { echo "cannot read $PREV"; exit 1; }
  echo "continuing from $PREV: $(find "$CACHE" -name '*.json' | wc -l) baselines"
else
  echo "no previous cache ($PREV): starting empty"
fi
LEFT=$((BUDGET - SECONDS - 30))  # 30 s for the tarball and the table at the end
echo "measuring for at most ${LEFT} s"
timeout -k 5 $((LEFT + 20)) python3 -P -m kevolve.cli bench baselines --suite "$KB" --level 1,2 --device cuda \
  --compile-baseline on --cache-dir "$CACHE" --published "$KB/results/timing/H100_Modal" \
  --out "$OUT/baselines_l12.json" --time-limit-s "$LEFT" "$@" > "$OUT/baselines_l12.log" 2>&1
rc=$?
tail -n 40 "$OUT/baselines_l12.log"
mkdir -p "$CACHE/baselines"
tar -czf "$OUT/baselines-cache.tar.gz" -C "$CACHE" baselines \
  && echo "cache: $(find "$CACHE/baselines" -name '*.json' | wc -l) baselines in $OUT/baselines-cache.tar.gz"
case $rc in
  0) echo "rc 0: every level-1 and level-2 problem has its baselines";;
  3) echo "rc 3: time ran out; copy $OUT/baselines-cache.tar.gz to runs/baselines-cache.tar.gz and call again";;
  124|137) echo "rc $rc: killed at the outer time limit; what was measured is in the tarball; call again";;
  *) echo "rc $rc: see the rows with an error in $OUT/baselines_l12.md";;
esac
echo
# The per-level comparison, last: the first table of the markdown (up to its second blank line).
[ -f "$OUT/baselines_l12.md" ] && awk '/^$/{if (++blank == 2) exit} {print}' "$OUT/baselines_l12.md"
exit $rc
