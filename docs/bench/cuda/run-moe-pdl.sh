#!/bin/bash
# run-moe-pdl.sh: prefill at 512 / 1K / 1152 / 1536 / 4K tokens, two
# alternating rounds, of f3ab956 (petal-prev) with its defaults and with
# pdl=on (every kernel launched while the one before runs: a first run at a
# new length launches its 834 kernels one by one, 33.7 ms against 28.7
# replayed at 512 tokens in report11), and of petal, whose MoE takes the
# 64-row register-A tile up to 56 rows an expert on average (f3ab956: up to
# 32; 1152 tokens, 36 rows, ran at 21,236 tok/s against 23,422 at 1K in
# hostprof1). From the repository root; devrun/ab/petals.txz holds both
# (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w', XZ_OPT=-9
# tar cJf). About 3 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/devrun/ab; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd $B && tar xJf petals.txz)
gpu_env "$O/env.txt"
for round in 1 2; do
  for v in petal-prev:cuda petal-prev:cuda:pdl=on petal:cuda; do
    b=${v%%:*}; be=${v#*:}
    bench_run "$B/$b" "$O" "$round-$b-$(tag_of $be)" $be --max-context 4200 --prompt-lengths 512,1K,1152,1536,4K \
      --context-lengths 256 --decode-tokens 4 --repeats 2
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
