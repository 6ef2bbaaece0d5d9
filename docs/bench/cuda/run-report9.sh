#!/bin/bash
# run-report9.sh: the benchmark report of this build (run-report.sh, its
# folder tarred as report.tgz), attn=wide, kvcopy=off and gemm=wg ablated.
# From the repository root; devrun/report2/petal.xz is CGO_ENABLED=0
# GOOS=linux GOARCH=amd64 go build -ldflags='-s -w', xz -9. About 4 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/devrun/report2; mkdir -p "$O"
xz -dc $B/petal.xz > $B/petal && chmod +x $B/petal
PETAL=$B/petal LIMIT=${LIMIT:-230} ABLATE=${ABLATE-attn=wide,kvcopy=off,gemm=wg} OUT=/tmp/rep bash docs/bench/cuda/run-report.sh | tail -40
tar czf $O/report.tgz -C /tmp rep
