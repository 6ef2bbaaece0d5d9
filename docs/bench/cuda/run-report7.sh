#!/bin/bash
# run-report7.sh: the benchmark report of this build (run-report.sh, its
# folder tarred as report.tgz) with gemm=tc among the ablations (the mma.sync
# tiles in the wgmma tiles' places), then the peer's lengths with three runs
# a length for this build and for petal-old (4f3d75a, the build of the
# 2026-12-03 H200 report), then short prompts (16, 64, 256 tokens) of both.
# From the repository root; devrun/report/petals.txz holds petal and
# petal-old (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w',
# petal-old from a worktree of 4f3d75a; XZ_OPT=-9 tar cJf: the two share
# most of their bytes). About 8 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/devrun/report; mkdir -p "$O"
(cd $B && tar xJf petals.txz)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
PETAL=$B/petal LIMIT=${LIMIT:-230} ABLATE=${ABLATE-gemm=tc,moe=smem,kv=bf16} OUT=/tmp/rep bash docs/bench/cuda/run-report.sh | tail -34
tar czf $O/report.tgz -C /tmp rep
for b in petal petal-old; do
	timeout 100 $B/$b bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512,1K,4K,16K \
		--context-lengths 256,4K,16K --decode-tokens 64 --repeats 3 --out $O/repeats-$b.json > $O/repeats-$b.txt 2>&1
	echo "$b"; tail -8 $O/repeats-$b.txt
done
for b in petal petal-old; do
	timeout 45 $B/$b bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 4096 --prompt-lengths 16,64,256 \
		--context-lengths 256 --decode-tokens 8 --repeats 3 --out $O/short-$b.json > $O/short-$b.txt 2>&1
	echo "short $b"; tail -4 $O/short-$b.txt
done
(cd $O && tar czf short.tgz short-* && rm -f short-*)
