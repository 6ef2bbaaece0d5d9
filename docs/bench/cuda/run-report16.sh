#!/bin/bash
# run-report16.sh: the ninth report, today's defaults (router=i8,
# gdnnorm=cluster, moefit=on since 2026-12-06-deltacl1, kvshadow=on since
# 2026-12-06-kvshadow1) on the H200: the
# driver's compile kept for the next process (petal run on the checkout's
# tiny model twice, jit.txt), the benchmark report (run-report.sh,
# report.tgz; kvshadow=off, kv=bf16, router=f64 and moefit=off ablated),
# and the C++/CUDA engine's lengths with three runs a length for this build
# and petal-old (dfa76fa, the seventh report's build) in two rounds
# (repeats.tgz), then decode at 32K and 128K under the defaults (kv=f32
# with its bf16 shadow), kv=bf16 and kvshadow=off (kv.tgz). From the repository root; devrun/report6/petals.txz holds
# petal and petal-old, both built -tags nofixture (devrun/report6/BUILT_FROM;
# the embedded model's weights left out to fit the carry). About 6 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/devrun/report6; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd $B && tar xJf petals.txz)
gpu_env "$O/env.txt"
{
  for i in 1 2; do
    s=$(date +%s.%N)
    timeout 120 $B/petal run --model fixtures/tiny-qwen36-moe-4bit --backend cuda:verbose=on --max-tokens 8 "Hi" 2>&1 | grep -E 'compiled a program of [0-9]+ ops .* into [0-9]+ kernels' | head -2
    echo "process $i: rc=${PIPESTATUS[0]}, $(awk "BEGIN{print $(date +%s.%N) - $s}") s"
  done
  echo "driver cache: $(du -sh ~/.nv/ComputeCache 2>/dev/null) (CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-unset})"
} > $O/jit.txt 2>&1
cat $O/jit.txt | cut -c1-220
PETAL=$B/petal LIMIT=${LIMIT:-230} ABLATE=${ABLATE-kvshadow=off,kv=bf16,router=f64,moefit=off} OUT=/tmp/rep bash docs/bench/cuda/run-report.sh | tail -30
tar czf $O/report.tgz -C /tmp rep
peer_repeats "$B" "$O"
# decode at 128K with the f32 cache's bf16 shadow (the default), the KV
# cache in bf16, and the f32 cache read as it is (5.4 GB a token there)
for be in cuda cuda:kv=bf16 cuda:kvshadow=off; do
  BENCH_LIMIT=120 bench_run "$B/petal" "$O" "kv-$(tag_of $be)" $be --max-context 132000 --prompt-lengths 512 \
    --context-lengths 32K,128K --decode-tokens 64 --floors=false
done
(cd $O && tar czf kv.tgz bench-kv-* && rm -f bench-kv-*)
