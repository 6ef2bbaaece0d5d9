#!/bin/bash
# run-eager1.sh: why a prefill that is not replayed from a CUDA graph is
# slower (moeys1: of three runs at 4K the third, the first replay, was
# 4-6 % faster than the first, run op by op, and the second, captured).
# petal bench with six runs a length (512, 1K, 4K) under the defaults and
# under graphs=off, each run's time printed; then the kernel trace
# (ktrace/ktrace.c, CUPTI) of three 4K prefills under the defaults and
# under graphs=off, every kernel's start and end on the GPU. From the
# repository root; $CARRY (default devrun/my) holds petals.txz (petal,
# -tags nofixture). About 2 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/my}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
runs() { python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
for r in d['results']:
    if 'prefill' in r: print('   ', r['length'], 'runs ms', [round(x*1e3,2) for x in r['prefill']['runs_seconds']])
" "$1"; }
for be in cuda cuda:graphs=off cuda cuda:graphs=off; do
  tag=$(tag_of $be)-$RANDOM
  BENCH_LIMIT=80 bench_run $D/petal $O "$tag" $be --max-context 5000 --prompt-lengths 512,1K,4K \
    --context-lengths 256 --decode-tokens 4 --repeats 6 --floors=false > /dev/null
  echo "$be:"; runs $O/bench-$tag.json
done
C=/usr/local/cuda/targets/x86_64-linux
KT=$(grep -oE '\} CUpti_ActivityKernel[0-9]+;' $C/include/cupti_activity.h | grep -oE 'CUpti_ActivityKernel[0-9]+' | sort -V | tail -1)
gcc -O2 -shared -fPIC -DKT=$KT -I$C/include -o /tmp/ktrace.so docs/bench/cuda/ktrace/ktrace.c -L$C/lib -lcupti -Wl,-rpath,$C/lib || exit 1
for be in cuda cuda:graphs=off; do
  tag=$(tag_of $be)
  CUDA_INJECTION64_PATH=/tmp/ktrace.so KTRACE_OUT=/tmp/kt-$tag.csv timeout 100 $D/petal bench \
    --synthetic qwen3.6-35b-a3b --max-context 5000 --floors=false --prompt-lengths 4K --context-lengths 256 \
    --decode-tokens 4 --repeats 3 --backend $be --out $O/ktbench-$tag.json > "$O/ktbench-$tag.txt" 2>&1
  echo "ktrace $be: rc=$?"; runs $O/ktbench-$tag.json
  sleep 0.2; gzip -c /tmp/kt-$tag.csv > "$O/ktrace-$tag.csv.gz"
done
pack_out "$O"
