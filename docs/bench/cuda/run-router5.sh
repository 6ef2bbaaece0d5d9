#!/bin/bash
# run-router5.sh: qgemm_f64_h (the float64 router on sm_90's m16n8k16
# products, written, not yet run on a GPU) through the router tests and
# TestMeasureRouter beside qgemm_f64_w, 16 to 16384 rows; TestMeasureGEMM
# with the MoE at 16384 tokens (a 16K-token chunk) on the wide tiles; ncu
# of both router kernels at 4096 rows (23 launches a timing, six timings
# a row count: launch 553 is the first at 4096 rows). From the repository root; devrun/nx
# holds cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c
# -ldflags='-s -w' ./engine/cuda; gzip). About 3 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/nx; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 120 $D/cuda.test -test.v -test.run 'TestRouterTensorCores|TestConformance' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | head; grep -E -- '--- FAIL|differ|above' $O/tests.txt | head -12
grep -E 'weights: error' $O/tests.txt | grep qgemm_f64_h | sort -u -k4 | head -4
PETAL_CUDA_BENCH=1 timeout 200 $D/cuda.test -test.v -test.run 'TestMeasureRouter|TestMeasureGEMM' > $O/measure.txt 2>&1
echo "measure: rc=$?"
grep -E 'router +(512|4096|16384) rows, qgemm_f64_[wh] ' $O/measure.txt | sed 's/.*backend_test.go:[0-9]*: //'
grep -E 'moe T=16384' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //' | cut -c1-200
for k in qgemm_f64_w qgemm_f64_h; do
  PETAL_CUDA_BENCH=1 timeout 90 ncu --kill yes --kernel-name $k --launch-skip 552 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section ComputeWorkloadAnalysis \
    $D/cuda.test -test.run TestMeasureRouter > $O/ncu-$k.txt 2>&1
  echo "== $k"; grep -E "Duration|Issue Slots Busy|Registers Per|Achieved Occ|Grid Size|FP64" $O/ncu-$k.txt | head -8
done
