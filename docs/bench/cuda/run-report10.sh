#!/bin/bash
# run-report10.sh: the benchmark report of this build (run-report.sh, its
# folder tarred as report.tgz; attn=wide, kvcopy=off and gemm=wg ablated),
# then the C++/CUDA engine's lengths with three runs a length for this
# build and petal-old (4f3d75a, the build of the 2026-12-03 H200 report),
# in two rounds (repeats.tgz). Made for an H200, where the engine's
# figures were measured. From the repository root; devrun/report3/petals.txz
# holds petal and petal-old, each CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go
# build -ldflags='-s -w' (the old one from a git worktree), XZ_OPT=-9 tar
# cJf. About 5 minutes on an H100.
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/devrun/report3; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd $B && tar xJf petals.txz)
gpu_env "$O/env.txt"
PETAL=$B/petal LIMIT=${LIMIT:-230} ABLATE=${ABLATE-attn=wide,kvcopy=off,gemm=wg} OUT=/tmp/rep bash docs/bench/cuda/run-report.sh | tail -30
tar czf $O/report.tgz -C /tmp rep
mkdir -p /tmp/rp
for round in 1 2; do
  for b in petal petal-old; do
    bench_run "$B/$b" /tmp/rp "repeats-$round-$b" cuda --max-context 20000 --prompt-lengths 512,4K,16K \
      --context-lengths 256,4K,16K --decode-tokens 64 --repeats 3
  done
done
tar czf $O/repeats.tgz -C /tmp/rp .
