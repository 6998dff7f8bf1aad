#!/usr/bin/env bash
# Issue 36's acceptance run on one GPU: `kevolve bench` cold over the leaderboard mix, then KernelBench's own harness
# on the mix's fixed subset, on the same machine (scripts/bench_throughput.py does both and writes the report).
#
# Carry: .whl (scripts/fetch_gpu_wheels.sh: the wheels, kevolve's own, bubblewrap's .deb in .whl/deb) and runs/lbmix
# (scripts/make_leaderboard_mix.py: solutions/, kernelbench/ = KernelBench's src/kernelbench and the chosen problems at
# 423217d, kb_subset.txt, manifest.json). Two calls of at most 10 minutes on the same warm machine:
#   1. bash scripts/gpu_leaderboard_mix.sh
#        kevolve bench cold over every candidate (stopped after KV_BUDGET s, default 240: what finished is counted over
#        that wall), then KernelBench's harness on the subset for the rest of the call (three samples at ~71 s each).
#   2. PHASE=kernelbench bash scripts/gpu_leaderboard_mix.sh
#        KernelBench continues the subset where call 1 stopped: its finished samples are in runs/lbmix-work, kept on a
#        warm machine (it goes back 30 s after a call: ask at once); on a fresh one, unpack call 1's
#        $OUT/lbmix-work.tar.gz into runs/ and carry runs/lbmix-work too. About six samples: the subset's nine in all.
#        Samples cut short by the call's end are not recorded; if some are left, the same command again finishes them.
# KernelBench's harness takes about 71 s an evaluation on the H100 (its build), so it evaluates only the subset fixed
# when the set was made (every 5th candidate: 9 of 44), never all 44; the ratio is per evaluation (its seconds per
# evaluation over kevolve's, each over what it evaluated). A sample cut short by the call's end is not recorded.
# PHASE=kevolve runs kevolve alone (KV_BUDGET=520 for a whole call, should 240 s not see all 44 through; then the
# KernelBench calls follow as PHASE=kernelbench); PHASE=report only rewrites the report. kevolve's part of the report
# has its time outside evaluations too (the run folder's timeline.jsonl: builds, the lane's waits, references).
# PHASE=reference: where a 6.4 GB problem's set-up goes (L1/19's float64 truth took 47.9 s on the H200): the judge's
# oracle.prepare of REF_PROBLEM (default level1/19_ReLU.py of the set) phase by phase, with a 6.4 GB pinned-allocation
# probe, on 1 core (as a one-GPU bench's judge) and on 8, with torch's default pinned allocator and with its
# cudaHostRegister path (8 threads); $OUT/reference.jsonl, one line each (~1 min each, ~5 min in all).
# Each call writes $OUT/run.log, $OUT/throughput.md and .json (the report so far), $OUT/lbmix-work.tar.gz (the work
# folder without builds). Environment: LIMIT (s for the whole call, default 570), KV_BUDGET, KB_TIMEOUT (s per
# KernelBench sample, default 180 as its eval_from_generations), BWRAP=0 (no bubblewrap even where carried), SET, WORK.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; T0=$SECONDS
LIMIT=${LIMIT:-570}; KV_BUDGET=${KV_BUDGET:-240}; KB_TIMEOUT=${KB_TIMEOUT:-180}; PHASE=${PHASE:-all}
SET=${SET:-runs/lbmix}; WORK=${WORK:-runs/lbmix-work}
case "$PHASE" in all|kevolve|kernelbench|report|reference) ;;
  *) echo "error: PHASE must be all, kevolve, kernelbench, report or reference, not $PHASE" >&2; exit 2;; esac
for n in LIMIT KV_BUDGET KB_TIMEOUT; do
  [[ ${!n} =~ ^[0-9]+$ ]] || { echo "error: $n must be whole seconds, not ${!n}" >&2; exit 2; }
done
for f in "$SET/solutions" "$SET/kernelbench/src/kernelbench" "$SET/kb_subset.txt"; do
  [ -e "$f" ] || { echo "error: $f: no such file or folder (carry $SET, made by scripts/make_leaderboard_mix.py)" >&2; exit 2; }
done
ls .whl/*.whl >/dev/null 2>&1 || { echo "error: no .whl/*.whl (carry .whl, made by scripts/fetch_gpu_wheels.sh)" >&2; exit 2; }
# installed again when the carried wheels changed (a warm machine keeps /tmp/site: another commit's kevolve wheel)
stamp=$( (ls .whl/*.whl; md5sum .whl/kevolve-*.whl 2>/dev/null) | md5sum | cut -c1-32)
if [ "$(cat /tmp/site/.done 2>/dev/null)" != "$stamp" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  echo "$stamp" > /tmp/site/.done
fi
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 KEVOLVE_WARM=0
[ -x /opt/gcc/bin/gcc ] && export CC=/opt/gcc/bin/gcc  # as scripts/replay_bench_gpu.sh ran the leaderboard's kernels
deb=$(ls .whl/deb/bubblewrap*.deb bw.deb 2>/dev/null | head -1)
if [ "${BWRAP:-1}" = 1 ] && [ -n "$deb" ]; then
  [ -x /tmp/bwrap/usr/bin/bwrap ] || bash scripts/unpack_bwrap.sh "$deb" /tmp/bwrap >/dev/null
  export KEVOLVE_BWRAP=/tmp/bwrap/usr/bin/bwrap
fi
{
  echo "== $(date -u +%FT%TZ) PHASE=$PHASE LIMIT=$LIMIT KV_BUDGET=$KV_BUDGET KB_TIMEOUT=$KB_TIMEOUT commit $(git rev-parse --short HEAD 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -P -m kevolve.cli doctor 2>&1 | grep -iE "isolation" | head -2
} 2>&1 | tee -a "$OUT/run.log"
TP=(python3 -P scripts/bench_throughput.py --kernelbench "$SET/kernelbench" --solutions "$SET/solutions"
    --kb-subset "$SET/kb_subset.txt" --work "$WORK" --kb-timeout "$KB_TIMEOUT" --bench-arg=--timings --bench-arg=--no-archive)
left() { echo $((LIMIT - (SECONDS - T0) - ${1:-0})); }
if [ "$PHASE" = reference ]; then
  prob=${REF_PROBLEM:-$SET/kernelbench/KernelBench/level1/19_ReLU.py}
  [ -f "$prob" ] || { echo "error: REF_PROBLEM $prob: no such file" >&2; exit 2; }
  for cores in 1 8; do
    for conf in "" "pinned_use_cuda_host_register:True,pinned_num_register_threads:8"; do
      [ "$(left 90)" -gt 0 ] || { echo "== out of time" | tee -a "$OUT/run.log"; break 2; }
      echo "== reference set-up: $prob, $cores core(s), allocator settings '${conf:-default}'" | tee -a "$OUT/run.log"
      timeout -s KILL "$(left 10)" python3 -P scripts/bench_reference.py "$prob" --cores "$cores" --pin-probe 6.4 \
        --alloc-conf "$conf" --json "$OUT/ref.json" 2>&1 | tail -40 | tee -a "$OUT/run.log"
      [ -f "$OUT/ref.json" ] && python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))" \
        "$OUT/ref.json" >> "$OUT/reference.jsonl" && rm -f "$OUT/ref.json"
    done
  done
  echo "== done at $((SECONDS - T0)) s" | tee -a "$OUT/run.log"
  exit 0
fi
"${TP[@]}" --dry-run 2>&1 | tee -a "$OUT/run.log"; [ "${PIPESTATUS[0]}" = 0 ] || exit 1
if { [ "$PHASE" = all ] || [ "$PHASE" = kevolve ]; } && [ "$(left 100)" -gt 0 ]; then
  budget=$(( KV_BUDGET < $(left 40) ? KV_BUDGET : $(left 40) ))
  echo "== kevolve bench cold, at most ${budget} s" | tee -a "$OUT/run.log"
  timeout -s KILL "$(left 10)" "${TP[@]}" --phase kevolve-cold --budget-s "$budget" 2>&1 | tee -a "$OUT/run.log"
fi
if { [ "$PHASE" = all ] || [ "$PHASE" = kernelbench ]; } && [ "$(left 60)" -gt 0 ]; then
  echo "== KernelBench's harness on the subset, at most $(left 30) s" | tee -a "$OUT/run.log"
  timeout -s KILL "$(left 10)" "${TP[@]}" --phase kernelbench --kb-budget-s "$(left 30)" 2>&1 | tee -a "$OUT/run.log"
fi
[ "$PHASE" = report ] && "${TP[@]}" --phase report > /dev/null
cp "$WORK/throughput.md" "$WORK/throughput.json" "$OUT/" 2>/dev/null
tar -czf "$OUT/lbmix-work.tar.gz" --exclude=kb-build --exclude=kevolve-cache --exclude=chosen-solutions --exclude='*.so' \
  -C "$(dirname "$WORK")" "$(basename "$WORK")"
echo "== done at $((SECONDS - T0)) s" | tee -a "$OUT/run.log"
