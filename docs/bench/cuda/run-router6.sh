#!/bin/bash
# run-router6.sh: router=f64d (route_f64.cu's qgemm_f64_d: qgemm_f64_h's
# logits bit for bit, the next group of columns staged into a second stage
# while this one's products run, one barrier a group, x float32 in shared
# memory; written, not yet run): TestRouterTensorCoresMatchReference (the
# experts the reference's at 512 and 2100 rows with the 64 x 64 tiles
# forced) and TestMeasureRouter (every router kernel at 16 .. 16384 rows
# and 0-16 blocks a multiprocessor; qgemm_f64_h took 44 / 62 / 175 / 653 us
# at 512 / 1K / 4K / 16K rows on an H100, router5), then prefill at 512 /
# 4K / 16K under router=f64 and router=f64d in two alternating rounds.
# About 4 minutes. From the repository root; devrun/s2 holds cuda.test.xz
# and petal.xz as run-sampled2.sh says.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/s2; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 150 $D/cuda.test -test.v -test.run 'TestRouterTensorCoresMatchReference|TestRouterStagedShared' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | head -8; grep -E -- '--- FAIL|differ' $O/tests.txt | head -12
PETAL_CUDA_BENCH=1 timeout 150 $D/cuda.test -test.v -test.run 'TestMeasureRouter' > $O/measure.txt 2>&1
echo "measure: rc=$?"
grep -E 'router +(512|1024|4096|16384) rows, (qgemm_f64_h|qgemm_f64_d) ' $O/measure.txt | sed 's/.*backend_test.go:[0-9]*: //'
cd $R
for round in 1 2; do
  for be in cuda cuda:router=f64d; do
    bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512,4K,16K \
      --context-lengths 256 --decode-tokens 4 --repeats 2 --floors=false
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
