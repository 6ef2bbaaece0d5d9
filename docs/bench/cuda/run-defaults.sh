#!/bin/bash
# run-defaults.sh: the defaults of 2026-12-06 after pipe1 (gemm=wgrp,
# attn=wgp) against the ones before (gemm=wgr,attn=wg) and with moe=wg
# (w32r at 5-16 rows an expert), two alternating rounds at 512 / 1K / 4K /
# 16K tokens; then prefill chunks of 4096, 8192 and 16384 tokens at 32K
# and 128K. From the repository root; devrun/nx holds cuda.test.gz and
# petal.xz as run-pipe.sh says. About 6 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/nx; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
for round in 1 2; do
  for be in cuda cuda:gemm=wgr,attn=wg cuda:moe=wg; do
    bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512,1K,4K,16K \
      --context-lengths 256 --decode-tokens 8 --repeats 2
  done
done
for chunk in 4096 8192 16384; do
  bench_run "$D/petal" "$O" "chunk$chunk" cuda --max-context 131100 --chunk $chunk --prompt-lengths 32K,128K \
    --context-lengths 256 --decode-tokens 8 --repeats 1
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
