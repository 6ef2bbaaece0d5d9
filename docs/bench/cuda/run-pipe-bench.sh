#!/bin/bash
# (Ran as docs/bench/cuda/2026-12-06-pipebench1.)
# run-pipe-bench.sh: prefill with the defaults, gemm=wgrp, attn=wgp and
# moe=wg alternating, two rounds at 512 / 4K / 16K / 32K; the defaults with
# chunks of 8192 tokens; 128K once with the defaults and attn=wgp; decode at
# 4K and 128K with kv=f32 and kv=bf16; then the
# defaults' --profile at 512 and 4K tokens (op time by layer kind and op
# family). From the repository root; devrun/nx as run-pipe.sh says. About
# 5 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/nx; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
for round in 1 2; do
  for be in cuda cuda:gemm=wgrp cuda:attn=wgp cuda:moe=wg; do
    bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 33000 --prompt-lengths 512,4K,16K,32K \
      --context-lengths 256 --decode-tokens 8 --repeats 2
  done
done
# the defaults with prefill chunks of 8192 tokens (the default 4096 above)
bench_run "$D/petal" "$O" chunk8192 cuda --max-context 33000 --chunk 8192 --prompt-lengths 8K,16K,32K \
  --context-lengths 256 --decode-tokens 8 --repeats 2
for be in cuda cuda:attn=wgp; do
  bench_run "$D/petal" "$O" "128K-$(tag_of $be)" $be --max-context 131100 --prompt-lengths 128K \
    --context-lengths 256 --decode-tokens 8 --repeats 1
done
# decode at 4K and 128K with the f32 KV cache and with kv=bf16 (the goal of 500 tok/s at 128K is
# set for a bf16 cache: the f32 one's bytes alone take 1.8 ms a token at 128K on an H100)
for be in cuda cuda:kv=bf16; do
  bench_run "$D/petal" "$O" "decode-$(tag_of $be)" $be --max-context 131200 --prompt-lengths 512 \
    --context-lengths 4K,128K --decode-tokens 32 --repeats 2
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
timeout 120 $D/petal bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 8192 --prompt-lengths 512,4K \
  --context-lengths 4K --decode-tokens 16 --profile > $O/profile.txt 2>&1
echo "profile: rc=$?"; grep -A14 "^profile at 4K" $O/profile.txt | head -40
