#!/bin/bash
# run-router-bench.sh: prefill with qgemm_f64_h as the float64 router's
# kernel from 512 rows (petal) against 9001bdc, whose router took
# qgemm_f64_w from 1024 rows and qgemm_f64 below (petal-prev), two
# alternating rounds at 512 / 1K / 4K / 16K tokens, then 128K once each.
# From the repository root; devrun/ab/petals.txz holds both, each
# CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w', XZ_OPT=-9
# tar cJf. About 4 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/devrun/ab; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd $B && tar xJf petals.txz)
gpu_env "$O/env.txt"
for round in 1 2; do
  for b in petal petal-prev; do
    bench_run "$B/$b" "$O" "$round-$b" cuda --max-context 17000 --prompt-lengths 512,1K,4K,16K \
      --context-lengths 256 --decode-tokens 8 --repeats 2
  done
done
for b in petal petal-prev; do
  bench_run "$B/$b" "$O" "128K-$b" cuda --max-context 131100 --prompt-lengths 128K \
    --context-lengths 256 --decode-tokens 8 --repeats 1
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
