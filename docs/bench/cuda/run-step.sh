#!/bin/bash
# run-step.sh: one GPU session for the router, Gated DeltaNet and attention
# kernels: ptxas resource reports of their embedded PTX, the correctness
# tests, then the measurements. Run as devrun/run.sh next to cuda.test
# (CGO_ENABLED=0 go test -c ./engine/cuda) and a copy of engine/cuda/kernels.
set -o pipefail
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
for f in route gdn attn; do
	echo "== ptxas -arch=sm_90 -O3 -v kernels/$f.ptx"
	ptxas -arch=sm_90 -O3 -v -o $f.cubin kernels/$f.ptx
done > $O/ptxas.txt 2>&1
grep -E "error|Used|spill" $O/ptxas.txt
export PETAL_CUDA_REQUIRE=1
./cuda.test -test.v -test.timeout 300s -test.run 'TestRoute|TestGDN|TestAttn|TestQKPrep' 2>&1 | tee $O/test.txt | grep -E '^(--- |ok|FAIL|PASS)|rror|panic'
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv -lms 250 > $O/clocks.txt 2>&1 &
SMI=$!
PETAL_CUDA_BENCH=1 ./cuda.test -test.v -test.timeout 280s -test.run "${MEASURE:-TestMeasureMoELayer|TestMeasureGDN|TestMeasureAttn}" 2>&1 | tee $O/measure.txt | grep -vE '^=== RUN'
kill $SMI
