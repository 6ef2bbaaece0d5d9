#!/bin/bash
# run-report16.sh: a report on the day's defaults (the ninth is the first
# it makes: router=i8, gdnnorm=cluster and moefit=on since
# 2026-12-06-deltacl1, kvshadow=on since 2026-12-06-kvshadow1), meant for
# the H200: the driver's compile kept for the next process (petal run on
# the checkout's tiny model twice, jit.txt), the benchmark report
# (run-report.sh, report.tgz; $ABLATE ablated), the C++/CUDA engine's
# lengths with three runs a length for petal and petal-old in two rounds
# (repeats.tgz), then decode at 32K and 128K under each of $KV_BACKENDS
# (kv.tgz). From the repository root; $CARRY/petals.txz holds petal and
# petal-old, both built -tags nofixture ($CARRY/BUILT_FROM says which).
# Later reports set CARRY, ABLATE and KV_BACKENDS instead of copying this
# script. About 6 minutes.
#   CARRY        default devrun/report6 (petal of 6e2154b, petal-old of dfa76fa)
#   ABLATE       default kvshadow=off,kv=bf16,router=f64,moefit=off
#   KV_BACKENDS  default "cuda cuda:kv=bf16 cuda:kvshadow=off" (the f32
#                cache's bf16 shadow, the cache in bf16, the f32 cache
#                read as it is: 5.4 GB a token at 128K)
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/${CARRY:-devrun/report6}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
[ -x "$B/petal" ] && [ -x "$B/petal-old" ] || (cd $B && tar xJf petals.txz)
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
for be in ${KV_BACKENDS:-cuda cuda:kv=bf16 cuda:kvshadow=off}; do
  BENCH_LIMIT=120 bench_run "$B/petal" "$O" "kv-$(tag_of $be)" $be --max-context 132000 --prompt-lengths 512 \
    --context-lengths 32K,128K --decode-tokens 64 --floors=false
done
(cd $O && tar czf kv.tgz bench-kv-* && rm -f bench-kv-*)
