#!/usr/bin/env bash
# One device call: install the carried wheels, probe the machine, run tests/gpu and the evaluator
# benchmark. Usage (device tool, carry .whl): [TESTS=…] bash scripts/gpu_session.sh [pytest-args]
# tests/gpu's 120 tests took over 570 s on an H200 (2026-11-29): two calls, e.g. TESTS=tests/gpu/test_offline_gpu.py
# and TESTS="tests/gpu/test_gpu_eval.py tests/gpu/test_gpu_faults.py tests/gpu/test_residency_gpu.py …"
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cupy', cupy.__version__)"
# shellcheck disable=SC2086
python3 -P -m pytest -q ${TESTS:-tests/gpu} -p no:cacheprovider "$@" 2>&1 | tee "$OUT/pytest_gpu.log"
