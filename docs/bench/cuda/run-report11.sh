#!/bin/bash
# run-report11.sh: the benchmark report of this build (run-report.sh, its
# folder tarred as report.tgz; the defaults before pipe2 ablated: attn=wg,
# gemm=wgr, and kvcopy=off, kv=bf16), then the C++/CUDA engine's lengths
# with three runs a length for this build and petal-old (4f3d75a, the build
# of the 2026-12-03 H200 report) in two rounds (repeats.tgz), then
# --profile of a 512-token prefill under moe=stream and moe=wg (profiles.tgz).
# From the repository root; devrun/report3/petals.txz holds petal and
# petal-old, each CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build
# -ldflags='-s -w' (the old one from a git worktree), XZ_OPT=-9 tar cJf.
# About 8 minutes on an H100.
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/devrun/report3; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd $B && tar xJf petals.txz)
gpu_env "$O/env.txt"
PETAL=$B/petal LIMIT=${LIMIT:-230} ABLATE=${ABLATE-attn=wg,gemm=wgr,kvcopy=off,kv=bf16} OUT=/tmp/rep bash docs/bench/cuda/run-report.sh | tail -30
tar czf $O/report.tgz -C /tmp rep
peer_repeats "$B" "$O"
mkdir -p /tmp/pf
for be in cuda cuda:moe=wg; do
  timeout 90 $B/petal bench --backend $be --synthetic qwen3.6-35b-a3b --max-context 4096 --prompt-lengths 512 \
    --context-lengths 256 --decode-tokens 4 --repeats 2 --profile > /tmp/pf/profile-$(tag_of $be).txt 2>&1
  echo "profile $be: rc=$?"; grep -E '^ +512 |moe.experts|^profile at' /tmp/pf/profile-$(tag_of $be).txt | head -6
done
tar czf $O/profiles.tgz -C /tmp/pf .
