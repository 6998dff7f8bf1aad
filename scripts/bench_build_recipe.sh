#!/bin/bash
# The build recipe's compile commands (sandbox/build/recipe.py) as plain shell, side by side with torch's
# load_inline, on a GPU machine that has torch + nvcc but not kevolve's dependencies (the device
# machines here lack pydantic). What docs/BENCHMARKS.md "Build service (issue 12)" measured on the H100.
#
#   bash scripts/bench_build_recipe.sh            # from a checkout root; ~5 min on 16 cores
#
# 1. one candidate (p1): torch's default .cu vs the slim-header .cu (nvcc --time phases), main.cpp
#    without vs with a precompiled header, the PCH build itself;
# 2. the 14 level-1 solutions' .cu with the slim headers (which ones would fall back);
# 3. end to end, 14 candidates 7 at a time: the recipe (PCH main.cpp || slim .cu, then link) vs
#    plain load_inline in a clean environment; every recipe-built module is imported.
set -u
R=$(pwd); W=/tmp/kevolve-recipe; rm -rf $W; mkdir -p $W; cd $W
export PY=python3 NVCC=/usr/local/cuda/bin/nvcc CXX=${CXX:-c++}
TD=$($PY -c "import torch,os;print(os.path.dirname(torch.__file__))"); export TL=$TD/lib; TI=$TD/include
PYI=$($PY -c "import sysconfig;print(sysconfig.get_path('include'))")
STD=$($PY -c "import inspect,re;from torch.utils import cpp_extension as c;print(re.findall(r\"'-fPIC', '-std=([^']+)'\",inspect.getsource(c._write_ninja_file_to_build_library))[0])")
CCB=""; [ -n "${CC:-}" ] && CCB="-ccbin $CC"  # torch passes $CC to nvcc the same way
SYS="-isystem $TI -isystem $TI/torch/csrc/api/include -isystem /usr/local/cuda/include -isystem $PYI"
export NVF="-DTORCH_API_INCLUDE_EXTENSION_H $SYS -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90 --compiler-options -fPIC -O3 -std=$STD $CCB"
export HF="-DTORCH_API_INCLUDE_EXTENSION_H $SYS -fPIC -std=$STD"
# the slim headers, as recipe.ensure_shim makes them
cp -r $R/sandbox/shim S; mkdir -p S/ATen/ops
for op in empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange; do
 grep -v -E '#include <(ATen/Context.h|ATen/DeviceGuard.h|ATen/TensorUtils.h|ATen/TracerMode.h|ATen/core/Generator.h|ATen/core/Reduction.h|c10/core/Storage.h)>' $TI/ATen/ops/$op.h > S/ATen/ops/$op.h; done
# main.cpp and cuda.cu as load_inline writes them
for f in $R/scripts/kernelbench_level1_solutions/*.py; do
 n=$(basename $f .py | sed 's/level_1_problem_\([0-9]*\).*/p\1/')
 $PY - "$f" "$n" <<'P'
import re,sys
s=open(sys.argv[1]).read(); cu=re.search(r'_CUDA = r"""(.*?)"""', s, re.S).group(1); cpp=re.search(r'_CPP = "(.*?)"', s).group(1)
fn=re.search(r'functions=\["(\w+)"\]', s).group(1)
open(sys.argv[2]+".cu","w").write("\n".join(["#include <torch/types.h>","#include <cuda.h>","#include <cuda_runtime.h>",cu]))
open(sys.argv[2]+".cpp","w").write("\n".join(["#include <torch/extension.h>",cpp,"PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {",f'm.def("{fn}", torch::wrap_pybind_function({fn}), "{fn}");',"}"]))
P
 echo "$n $f" >> list.txt
done
ms() { echo $(( ($(date +%s%N)-$1)/1000000 )); }
t() { local n=$1; shift; local s=$(date +%s%N); "$@" > $n.log 2>&1; echo "$n rc=$? ms=$(ms $s)" >> times.txt; }
recipe() { local n=$1 d=r_$1 s=$(date +%s%N); mkdir -p $d
 $CXX -DTORCH_EXTENSION_NAME=kx_$n -Ipch -Winvalid-pch $HF -c $n.cpp -o $d/m.o 2>$d/m.log &
 $NVCC -IS -DTORCH_EXTENSION_NAME=kx_$n $NVF -c $n.cu -o $d/c.o 2>$d/c.log & wait
 $CXX $d/m.o $d/c.o -shared -L$TL -lc10 -lc10_cuda -ltorch_cpu -ltorch_cuda -ltorch -ltorch_python -L/usr/local/cuda/lib64 -lcudart -o $d/kx_$n.so
 echo "recipe $n rc=$? ms=$(ms $s) pch_rejected=$(grep -c 'not used' $d/m.log)"; }
plain() { env -i PATH=$PATH HOME=/root TORCH_EXTENSIONS_DIR=/tmp/te_$1 $PY -c "import torch,time; t=time.monotonic(); exec(open('$2').read()); print('plain $1 s', round(time.monotonic()-t,1))" 2>&1 | grep '^plain'; }
export -f ms recipe plain
mkdir -p pch/torch; ln -s $TI/torch/extension.h pch/torch/extension.h
echo "== 1. one candidate"
t pch_build $CXX $HF -x c++-header -c $TI/torch/extension.h -o pch/torch/extension.h.gch &
t cu_default $NVCC -DTORCH_EXTENSION_NAME=kx $NVF -c p1.cu -o d.o --time d.csv &
t cu_slim $NVCC -IS -DTORCH_EXTENSION_NAME=kx $NVF -c p1.cu -o s.o --time s.csv &
t cpp_default $CXX -DTORCH_EXTENSION_NAME=kx $HF -c p1.cpp -o md.o &
wait
t cpp_pch $CXX -DTORCH_EXTENSION_NAME=kx -Ipch -Winvalid-pch $HF -c p1.cpp -o m.o
sort times.txt; echo "-- nvcc phases, default:"; cut -d, -f2,7 d.csv; echo "-- nvcc phases, slim:"; cut -d, -f2,7 s.csv
echo "== 2. slim .cu of every candidate (a failure would fall back to the real headers)"
for c in p*.cu; do [ $c = p1.cu ] && continue; t corpus_${c%.cu} $NVCC -IS -DTORCH_EXTENSION_NAME=kx $NVF -c $c -o ${c%.cu}.o & done; wait
grep corpus_ times.txt | sort
echo "== 3. end to end, 7 at a time"
recipe p1; rm -rf r_p1
s=$(date +%s%N); cut -d' ' -f1 list.txt | xargs -P 7 -I{} bash -c 'recipe {}' | sort -k2; echo "recipe: 14 candidates, wall ms=$(ms $s)"
$PY -c "
import glob,importlib.util as u, torch
mods = {}
for so in sorted(glob.glob('r_*/kx_*.so')):
    n=so.split('/')[-1][:-3]; s=u.spec_from_file_location(n,so); mods[n]=u.module_from_spec(s); s.loader.exec_module(mods[n])
A=torch.randn(512,512,device='cuda'); B=torch.randn(512,512,device='cuda')
print('imported', len(mods), 'modules; recipe-built p1 equals A@B:', torch.allclose(mods['kx_p1'].gemm_p1(A,B),A@B,atol=1e-3,rtol=1e-3))"
s=$(date +%s%N); cat list.txt | xargs -P 7 -L1 bash -c 'plain $0 $1' | sort -k2; echo "plain load_inline: 14 candidates, wall ms=$(ms $s)"
