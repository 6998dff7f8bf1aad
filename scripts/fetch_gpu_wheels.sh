#!/usr/bin/env bash
# Wheels that the GPU machine lacks (it has torch, CuPy, Triton, numpy, rich, typer, but no
# registry), for Python 3.12, into the git-ignored .whl/, plus a kevolve wheel built from this tree.
# Versions: the ones this checkout's .venv holds. Usage: bash scripts/fetch_gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
mkdir -p .whl
rm -f .whl/kevolve-*.whl
NAMES="pydantic pydantic_core annotated-types typing-inspection langgraph langgraph-checkpoint langgraph-prebuilt
langgraph-sdk langchain-core langsmith ormsgpack jsonpatch jsonpointer tenacity orjson zstandard uuid_utils
requests-toolbelt langchain-protocol opentelemetry-api langgraph-checkpoint-sqlite aiosqlite sqlite-vec openai distro
jiter sniffio anthropic docstring_parser docker SQLAlchemy alembic Mako xxhash"
PLAT="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64
--platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64 --platform any"
for name in $NAMES; do
  ver=$($PY -m pip show "$name" 2>/dev/null | awk '/^Version:/{print $2}')
  [ -n "$ver" ] || { echo "not installed here: $name"; exit 1; }
  norm=$(echo "$name" | tr 'A-Z-' 'a-z_')
  ls .whl | tr 'A-Z-' 'a-z_' | grep -q "^${norm}-${ver}-" && continue
  # shellcheck disable=SC2086
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT \
    -d .whl "$name==$ver"
done
$PY -m pip wheel -q --no-deps -w .whl .
ls .whl | wc -l
