#!/usr/bin/env bash
# One device call (issue 36): bench_warm_eval, then cold `kevolve eval` with the one-pass compare at every size (=all,
# as before 2026-11-28) and by default, alternated; then the per-element GPU tests. Carry .whl.
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
(cd /tmp && timeout 230 python3 -P "$R/scripts/bench_warm_eval.py" --device cuda --problem "$R/tests/fixtures/problems/relu.py" \
  --solution "$R/tests/gpu/solutions/relu_cupy.py" --n 3 --pause 10) > "$OUT/warm_eval.md" 2>&1
export KEVOLVE_CACHE_DIR=/tmp/kc KEVOLVE_WARM=0
for m in all 1 all 1; do
  (cd /tmp && python3 - "$R" "$m" <<'PY'
import os, subprocess, sys, time
R, m = sys.argv[1], sys.argv[2]
env = {**os.environ, "KEVOLVE_FUSED_COMPARE": m}
t = time.monotonic()
r = subprocess.run([sys.executable, "-P", "-m", "kevolve.cli", "eval", f"{R}/tests/fixtures/problems/relu.py",
                    f"{R}/tests/gpu/solutions/relu_cupy.py", "--device", "cuda", "--timings"], capture_output=True, text=True, env=env)
w = time.monotonic() - t
line = " ".join(l.strip() for l in r.stdout.splitlines() if l.startswith(" time") or l.startswith("                0."))
print(f"cold fused={m}: wall {w:.2f} s; {r.stdout.splitlines()[0][:40]}; {line}")
PY
  ) >> "$OUT/cold_side.md" 2>&1
done
unset KEVOLVE_CACHE_DIR KEVOLVE_WARM
KEVOLVE_TEST_ISOLATION=none timeout 150 python3 -P -m pytest -q tests/gpu/test_gpu_eval.py tests/gpu/test_fused_compare_gpu.py -k "every_element or fused" -p no:cacheprovider > "$OUT/tests.log" 2>&1
cat "$OUT/warm_eval.md" | tail -12; cat "$OUT/cold_side.md"; tail -3 "$OUT/tests.log"
