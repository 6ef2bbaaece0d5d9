#!/bin/bash
# run-report8.sh: the benchmark report of this build (run-report.sh, its
# folder tarred as report.tgz; gemm=tc and kv=bf16 ablated), then the
# peer's lengths with three runs a length for this build, petal-prev and
# petal-old (repeats.tgz), then short prompts (16, 64, 256 tokens) of this
# build and petal-old (short.tgz). From the repository root;
# devrun/report/petals.txz holds petal, petal-prev (63b5e69's parent's
# choice of tiles: the build of 43f4c98, w128o and w64o) and petal-old
# (4f3d75a, the build of the 2026-12-03 H200 report), each CGO_ENABLED=0
# GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' (the old ones from a
# git worktree), XZ_OPT=-9 tar cJf. About 4 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/devrun/report; mkdir -p "$O"
(cd $B && tar xJf petals.txz)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
PETAL=$B/petal LIMIT=${LIMIT:-230} ABLATE=${ABLATE-gemm=tc,kv=bf16} OUT=/tmp/rep bash docs/bench/cuda/run-report.sh | tail -30
tar czf $O/report.tgz -C /tmp rep
mkdir -p /tmp/rp
for b in petal petal-prev petal-old; do
	timeout 100 $B/$b bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512,1K,4K,16K \
		--context-lengths 256,4K,16K --decode-tokens 64 --repeats 3 --out /tmp/rp/repeats-$b.json > /tmp/rp/repeats-$b.txt 2>&1
	echo "$b"; tail -7 /tmp/rp/repeats-$b.txt
done
for b in petal petal-old; do
	timeout 45 $B/$b bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 4096 --prompt-lengths 16,64,256 \
		--context-lengths 256 --decode-tokens 8 --repeats 3 --out /tmp/rp/short-$b.json > /tmp/rp/short-$b.txt 2>&1
	echo "short $b"; tail -4 /tmp/rp/short-$b.txt
done
tar czf $O/repeats.tgz -C /tmp/rp .
