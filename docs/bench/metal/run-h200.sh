#!/bin/bash
# run-h200.sh: one GPU session that runs the Metal kernels' own source on an
# NVIDIA H200. The test binary of engine/metal/cudarun, cross-built with
#   CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -ldflags='-s -w' \
#     -o devrun/metal/cudarun.test ./engine/metal/cudarun
# launches every entry point of the PTX that kernels/cuda.sh makes from each
# .metal file through the dialect header kernels/cuda/metal_stdlib, against
# the float64 references. Usage, from the repository root:
#   OUT=logs bash run-h200.sh [path of the test binary]
# It runs all the tests in one process (which also checks that every entry
# point ran); tests that did not pass there are run again one at a time, so
# that a fault in one (a CUDA error spoils its context) does not hide the
# others.
set -o pipefail
BIN=${1:-devrun/metal/cudarun.test}
OUT=${OUT:-.}
tests="TestEntriesFound TestQMVMatchesReference TestRouteMatchesReference TestGDNMatchesReference TestAttnMatchesReference TestQKPrepLongPositions TestMoEMatchesReference"
{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
	sha256sum "$BIN"
	echo "PETAL_CUDA_REQUIRE=1 timeout 120 $BIN -test.v -test.timeout 110s"
} 2>&1 | tee "$OUT/env.log"
status=0
PETAL_CUDA_REQUIRE=1 timeout 120 "$BIN" -test.v -test.timeout 110s 2>&1 | tee "$OUT/cudarun.log" || status=$?
echo "exit status $status" | tee -a "$OUT/cudarun.log"
if [ $status -ne 0 ]; then
	for t in $tests; do
		grep -q -- "--- PASS: $t " "$OUT/cudarun.log" && continue
		echo "== $t alone" | tee -a "$OUT/retry.log"
		PETAL_CUDA_REQUIRE=1 timeout 30 "$BIN" -test.v -test.run "^$t\$" -test.timeout 25s 2>&1 | tee -a "$OUT/retry.log"
		echo "exit status $?" | tee -a "$OUT/retry.log"
	done
fi
exit $status
