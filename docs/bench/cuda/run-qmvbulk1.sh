#!/bin/bash
# run-qmvbulk1.sh: qmvbulk=on (qmv_bulk.cu: decode's mat-vecs with each
# block's weights brought to shared memory by bulk copies, the first asked
# for before the wait for the kernel before; written, not yet run): ptxas
# -v, the tests (TestQMVMatchesReference's bulk lines, TestNormGroupMatchesApart,
# conformance under qmvbulk=on), then decode at 256 / 4K / 16K under the
# defaults, qmvbulk=on and qmvbulk=on,pdl=on in two rounds, and
# TestMeasureQMV. From the repository root; devrun/rp holds cuda.test.xz
# and petal.xz (-tags nofixture). Everything packed in $OUT/bulk.tgz.
R=$(pwd); O=${OUT:-/tmp/out}/bulk; D=$R/devrun/rp; mkdir -p "$O"
. docs/bench/cuda/lib.sh
[ -x $D/petal ] || unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda/kernels
PATH=$PATH:/usr/local/cuda/bin
ptxas -arch=sm_90 -O3 -v qmv_bulk.ptx -o /tmp/qmv_bulk.cubin > $O/ptxas.txt 2>&1; echo "ptxas: rc=$?"; grep -E 'error|entry|Used|spill' $O/ptxas.txt | head -12
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run 'TestQMVMatchesReference|TestNormGroupMatchesApart|TestQMVGroupArgsMatchKernel|TestConformance/qmvbulk' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | grep -v 'PASS: Test[A-Za-z]*/' | head -12
grep -E -- '--- FAIL|differ|bits' $O/tests.txt | head -12
cd $R
for round in 1 2; do
  for be in cuda cuda:qmvbulk=on cuda:qmvbulk=on,pdl=on; do
    bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512 --context-lengths 256,4K,16K \
      --decode-tokens 64 --floors=false
  done
done
cd $R/engine/cuda
PETAL_CUDA_BENCH=1 timeout 100 $D/cuda.test -test.v -test.run 'TestMeasureQMV' > $O/measure.txt 2>&1
echo "measure: rc=$?"
(cd ${OUT:-/tmp/out} && tar czf bulk.tgz bulk && rm -rf bulk)
