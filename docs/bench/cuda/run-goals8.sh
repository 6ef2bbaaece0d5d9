#!/bin/bash
# run-goals8.sh: where the goals stand under today's defaults (router=i8,
# gdnnorm=cluster, moefit=on): petal bench at the goals' lengths, prefill
# and decode at 4K and 128K and the C++/CUDA engine's 512 and 16K, one run
# a length. From the repository root; devrun/ri holds petal.xz (-tags nofixture).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/ri; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
BENCH_LIMIT=150 bench_run "$D/petal" "$O" goals cuda --max-context 132000 --prompt-lengths 512,4K,16K,128K \
  --context-lengths 4K,16K,128K --decode-tokens 64
