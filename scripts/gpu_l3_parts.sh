#!/usr/bin/env bash
# One device call (≤ ~560 s): `kevolve optimize --offline --parts` on KernelBench level-3 problems, one after
# another, each under its own time limit; eager and torch.compile of the whole model are timed in the same
# evaluations that judge the composition. Prints a table last (problem, answer, parts, speedup vs eager and vs
# torch.compile, seconds) and writes each run's JSON, log and report under $OUT/l3/.
#
#   device tool, carry [".whl", "runs/kernelbench-upstream", "runs/l3_gpu"]:
#   L3=1,4,8 PT=90 LIMIT=520 bash scripts/gpu_l3_parts.sh
# Resumable over calls: a problem whose result is in runs/l3_gpu/ (copy $OUT/l3/* there after each call) is not run
# again, and the table covers them all. Default sample: the 25 odd numbers of level 3, spread over its 50.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/l3"
SUITE=${SUITE:-runs/kernelbench-upstream/KernelBench/level3}
L3=${L3:-$(seq -s, 1 2 49)}
DONE=${DONE:-runs/l3_gpu}
PT=${PT:-80}                 # seconds per problem (kevolve's --time-limit)
LIMIT=${LIMIT:-520}          # seconds for the whole call; no problem starts with less than PT left
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KEVOLVE_HOME=/tmp/kvhome
if [ -f .whl/deb/bubblewrap_0.8.0-2+deb12u1_amd64.deb ]; then
  bash scripts/unpack_bwrap.sh .whl/deb/bubblewrap_0.8.0-2+deb12u1_amd64.deb /tmp/bwrap >/dev/null \
    && export KEVOLVE_BWRAP=/tmp/bwrap/usr/bin/bwrap
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
start=$(date +%s)
for n in ${L3//,/ }; do
  if [ -s "$DONE/L3_$n.json" ]; then cp "$DONE/L3_$n".* "$OUT/l3/" 2>/dev/null; continue; fi
  left=$((LIMIT - ($(date +%s) - start)))
  [ "$left" -lt "$PT" ] && { echo "L3_$n: not started ($left s left)"; continue; }
  f=$(ls "$SUITE"/${n}_*.py 2>/dev/null | head -1)
  [ -n "$f" ] || { echo "L3_$n: no such problem"; continue; }
  t0=$(date +%s)
  timeout $((PT + 90)) python3 -P -m kevolve.cli optimize "$f" --offline --parts --device cuda --time-limit "$PT" \
    --json --quiet > "$OUT/l3/L3_$n.json" 2> "$OUT/l3/L3_$n.log"
  rc=$?
  echo "L3_$n rc=$rc $(( $(date +%s) - t0 )) s"
  d=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('run_dir',''))" "$OUT/l3/L3_$n.json" 2>/dev/null)
  [ -n "$d" ] && [ -f "$d/report.md" ] && cp "$d/report.md" "$OUT/l3/L3_$n.report.md"
done
python3 - "$OUT/l3" <<'EOF'
import json, math, sys
from pathlib import Path
rows, ge, gc = [], [], []
for p in sorted(Path(sys.argv[1]).glob("L3_*.json"), key=lambda p: int(p.stem.split("_")[1])):
    try:
        r = json.loads(p.read_text())
    except Exception:
        rows.append(f"| {p.stem} | no result ({(p.with_suffix('.log')).read_text()[-160:].strip()!r}) |")
        continue
    parts = r.get("parts") or []
    used = sum(1 for x in parts if x.get("candidate_id"))
    s, c = r.get("speedup"), r.get("speedup_vs_compile")
    if r.get("answer") == "faster" or (s and r.get("best_candidate_id")):
        ge.append(s); gc.append(c) if c else None
    f = lambda v: f"{v:.2f}" if isinstance(v, (int, float)) else "-"
    rows.append(f"| {p.stem} | {r.get('answer')} | {used}/{len(parts)} | {f(s)} | {f(c)} | {f(r.get('eager_ms'))} | "
                f"{f(r.get('compile_ms'))} | {f(r.get('elapsed_s'))} | {r.get('stop_reason')} |")
print("| problem | answer | parts used | vs eager | vs compile | eager ms | compile ms | s | stop |")
print("|---|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
print(f"with a candidate: {len(ge)}; geomean vs eager {gm(ge):.3f}, vs compile {gm([x for x in gc if x]):.3f}")
EOF
