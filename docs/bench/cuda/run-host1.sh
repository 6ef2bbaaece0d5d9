#!/bin/bash
# run-host1.sh: where a prompt's first run at a new length spends its host
# time: petal bench at 512 and 1K tokens, three runs a length (record and
# launch kernel by kernel, capture, replay), with verbose=on (a line per
# compiled program: ops, kernels, the host's milliseconds lowering it and
# allocating its memory); then TestMeasureGEMM for the MoE tiles at 512
# and 1024 tokens routed evenly and skewed (w32r beside s16 and m32). From
# the repository root; devrun/nx as run-pipe.sh says. About 1 minute.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/nx; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
for be in cuda:verbose=on cuda; do
  timeout 90 $D/petal bench --backend $be --synthetic qwen3.6-35b-a3b --max-context 4096 --prompt-lengths 512,1K \
    --context-lengths 256 --decode-tokens 4 --repeats 3 --out $O/bench-$(tag_of $be).json > $O/bench-$(tag_of $be).txt 2>&1
  echo "$be: rc=$?"; grep -E '^ +(512|1K) ' $O/bench-$(tag_of $be).txt
done
grep -c 'program' $O/bench-cuda_verbose.on.txt; grep 'program' $O/bench-cuda_verbose.on.txt | head -30 | cut -c1-220
cd $R/engine/cuda
PETAL_CUDA_BENCH=1 timeout 120 $D/cuda.test -test.v -test.run 'TestMeasureGEMM' > $O/measure.txt 2>&1
grep -E 'moe T=(512|1024) +(routing|skew 0.[25] )' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //' | cut -c1-200
