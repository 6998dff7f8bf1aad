#!/usr/bin/env bash
# The audit on a GPU machine: `kevolve eval --audit` on each candidate of a folder (NN_Name.cand.py, the
# problem taken from runs/kernelbench-upstream/KernelBench/levelL/NN_Name.py), under bubblewrap when
# bw.deb is carried, then optionally pytest over tests/gpu. Carry: .whl, bw.deb,
# runs/kernelbench-upstream, the candidate folder. Environment: CANDS (folder, default
# runs/audit_probe), LEVEL (default 1), REPEAT (evaluations per candidate, default 1), PYTEST (pytest
# arguments; empty: none). Writes $OUT/<name>.<i>.json and $OUT/pytest.log; prints a table last.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if [ ! -f /tmp/site/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  touch /tmp/site/.done
fi
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 CC=/opt/gcc/bin/gcc
ISO=none
if [ -f bw.deb ]; then
  [ -x /tmp/bwrap/usr/bin/bwrap ] || bash scripts/unpack_bwrap.sh bw.deb /tmp/bwrap >/dev/null
  export KEVOLVE_BWRAP=/tmp/bwrap/usr/bin/bwrap KEVOLVE_TEST_ISOLATION=bwrap; ISO=bwrap
fi
CANDS=${CANDS:-runs/audit_probe}; LEVEL=${LEVEL:-1}; REPEAT=${REPEAT:-1}
nvidia-smi --query-gpu=name --format=csv,noheader
for c in "$CANDS"/*.cand.py; do
  [ -f "$c" ] || continue
  name=$(basename "$c" .cand.py)
  for i in $(seq "$REPEAT"); do
    t0=$SECONDS
    python3 -P -m kevolve.cli eval "runs/kernelbench-upstream/KernelBench/level$LEVEL/$name.py" "$c" \
      --audit --json --isolation "$ISO" > "$OUT/$name.$i.json" 2> "$OUT/$name.$i.err"
    echo "$name #$i: rc $? in $((SECONDS - t0)) s"
  done
done
if [ -n "${PYTEST:-}" ]; then
  # shellcheck disable=SC2086
  python3 -P -m pytest -q -p no:cacheprovider $PYTEST > "$OUT/pytest.log" 2>&1
  echo "pytest ($PYTEST): rc $?"; tail -5 "$OUT/pytest.log"
fi
python3 -P - "$OUT" <<'PY'
import json, pathlib, sys
print(f"{'candidate':24} {'status':8} {'speedup':>7} {'compile':>7} {'audit':>6} {'clock':>6} {'clk ms':>6} {'iqr':>6} {'stage':>6}  reason")
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    try:
        e = json.loads(f.read_text())
    except ValueError:
        print(f"{f.stem:24} (no JSON: see {f.stem}.err)"); continue
    a = e.get("audit") or {}
    fmt = lambda v, n=3: "-" if v is None else f"{v:.{n}f}"
    print(f"{f.stem[:24]:24} {e.get('status', '?'):8} {fmt(e.get('speedup'), 2):>7} {fmt(e.get('speedup_vs_compile'), 2):>7} "
          f"{fmt(a.get('speedup'), 2):>6} {fmt(a.get('judge_clock_speedup'), 2):>6} {fmt(a.get('clock_ms')):>6} "
          f"{fmt(a.get('clock_spread_ms')):>6} {fmt(a.get('staging_ms')):>6}  {(a.get('reason') or e.get('reason') or '')[:110]}")
PY
