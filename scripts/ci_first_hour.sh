#!/usr/bin/env bash
# CI step for issue 16: install exactly as README's main-job command says, in a fresh venv (no test
# extras), then run the main job and every subcommand's most common invocation (scripts/ci_first_hour.py).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(mktemp -d /tmp/kevolve-first-hour-venv.XXXXXX)
trap 'rm -rf "$VENV"' EXIT
python3 -m venv "$VENV"
. "$VENV/bin/activate"
# README: pip install -e '.[cuda]'. The one departure: torch pinned to the CPU wheel, as the README's test
# command does, because PyPI's default Linux torch is the CUDA build (gigabytes, of no use without a GPU).
# cupy-cuda13x, the [cuda] extra, installs on a CPU machine as it is.
pip install -q torch==2.13.0 -e '.[cuda]'
python scripts/ci_first_hour.py
