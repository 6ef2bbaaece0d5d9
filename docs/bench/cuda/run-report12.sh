#!/bin/bash
# run-report12.sh: first, whether the driver's compile of the PTX (5.9 s for
# a process's first program in host1) is kept for the next process: petal
# run on the embedded model twice, each process timed, and the driver's
# cache's size after (jit.txt). Then the benchmark report of this build
# (run-report.sh, report.tgz; moe=stream, gemm=wgr, attn=wg and kv=bf16
# ablated) and the C++/CUDA engine's lengths with three runs a length for
# this build and petal-old (4f3d75a, the build of the 2026-12-03 H200
# report) in two rounds (repeats.tgz). From the repository root;
# devrun/report3/petals.txz holds petal and petal-old, each CGO_ENABLED=0
# GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' (the old one from a git
# worktree), XZ_OPT=-9 tar cJf. About 6 minutes on an H100.
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/devrun/report3; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd $B && tar xJf petals.txz)
gpu_env "$O/env.txt"
{
  for i in 1 2; do
    s=$(date +%s.%N)
    timeout 120 $B/petal run --backend cuda:verbose=on --max-tokens 8 "Hi" 2>&1 | grep -E 'compiled a program of [0-9]+ ops .* into [0-9]+ kernels' | head -2
    echo "process $i: rc=${PIPESTATUS[0]}, $(awk "BEGIN{print $(date +%s.%N) - $s}") s"
  done
  echo "driver cache: $(du -sh ~/.nv/ComputeCache 2>/dev/null) (CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-unset})"
} > $O/jit.txt 2>&1
cat $O/jit.txt | cut -c1-220
PETAL=$B/petal LIMIT=${LIMIT:-230} ABLATE=${ABLATE-moe=stream,gemm=wgr,attn=wg,kv=bf16} OUT=/tmp/rep bash docs/bench/cuda/run-report.sh | tail -30
tar czf $O/report.tgz -C /tmp rep
peer_repeats "$B" "$O"
