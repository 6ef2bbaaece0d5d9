#!/bin/bash
# run-sampled.sh: decode with a sampled pick against the greedy one (the
# bench's): the model's defaults (temperature 0.6, top-k 20, top-p 0.95,
# as run takes them from generation_config.json), top-p alone, and a plain
# temperature over the whole vocabulary, at 256 / 4K / 16K of context,
# two rounds (ROUNDS). sample_row runs its radix selections in one block; this is
# what that costs a token. About 2 minutes with the cubins embedded. From
# the repository root; devrun/sp/petal.xz (CGO_ENABLED=0 GOOS=linux
# GOARCH=amd64 go build -ldflags='-s -w'; xz).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/sp; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
for round in $(seq 1 ${ROUNDS:-2}); do
  i=0
  for s in "" "--temperature 0.6 --top-k 20 --top-p 0.95" "--temperature 0.6 --top-p 0.95" "--temperature 1"; do
    i=$((i + 1))
    bench_run "$D/petal" "$O" "$round-s$i" cuda --max-context 17000 --prompt-lengths 512 --context-lengths 256,4K,16K \
      --decode-tokens 64 --floors=false $s
    grep -E '^decode:' "$O/bench-$round-s$i.txt" | cut -c1-160
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
