#!/bin/bash
# run-final.sh: a build checked and reported in one call of the GPU machine:
# the CUDA tests with the oracle (run-verify3.sh, into $OUT) and the
# benchmark report (run-report.sh, into $OUT/report). devrun/ml holds
# cuda.test.gz and ref.txz as run-verify3.sh wants them and petal.gz (the
# build: CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' .;
# gzip). The report's environment (LIMIT, ABLATE, lengths) passes through.
# From the repository root.
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O/report"
bash "$R/docs/bench/cuda/run-verify3.sh"
gunzip -f "$R/devrun/ml/petal.gz" && chmod +x "$R/devrun/ml/petal"
OUT=$O/report PETAL=$R/devrun/ml/petal bash "$R/docs/bench/cuda/run-report.sh"
