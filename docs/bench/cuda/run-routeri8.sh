#!/bin/bash
# run-routeri8.sh: qgemm_i8 without the conversion unit in its loop (the
# floors of x's parts by a magic-number add, the part sums in int64, the
# groups' int64 sums to float64 by a magic number, the scales and biases
# converted once a group): the router tests, conformance (router=i8 the
# default), TestMeasureRouter's i8 and f64_h lines, route_i8's cubin
# (ptxas as sass.sh runs it: route_i8.tgz) and ptxas -v, prefill at
# 512 / 4K / 16K under router=f64 and the default, two rounds. From the
# repository root; devrun/ri holds cuda.test.xz and petal.xz (-tags nofixture).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/ri; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 90 $D/cuda.test -test.v -test.run 'TestRouterTensorCores|TestConformance' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | grep -v 'PASS: Test[A-Za-z]*/' | head -8
grep -E -- '--- FAIL|differ' $O/tests.txt | head -8; grep -E 'under qgemm_i8' $O/tests.txt | sed 's/.*: weights/weights/' | head -24
PETAL_CUDA_BENCH=1 timeout 60 $D/cuda.test -test.v -test.run 'TestMeasureRouter' > $O/router.txt 2>&1
echo "router: rc=$?"; grep -E 'qgemm_i8|qgemm_f64_h' $O/router.txt | grep -E ' (1|2|4) blocks an SM' | sed 's/.*backend_test.go:[0-9]*: //' | head -36
cd $R/engine/cuda/kernels
PATH=$PATH:/usr/local/cuda/bin; v=$(ptxas --version | grep -o 'V[0-9][0-9.]*' | head -1)
ptxas -arch=sm_90 -O3 -v route_i8.ptx -o /tmp/route_i8.sm_90.cubin > $O/ptxas.txt 2>&1; grep -E 'Used|spill' $O/ptxas.txt
gzip -9 -n -f /tmp/route_i8.sm_90.cubin && echo "route_i8 sm_90 $(sha256sum route_i8.ptx | cut -d' ' -f1) $v" > /tmp/route_i8.manifest
(cd /tmp && tar czf $O/route_i8.tgz route_i8.sm_90.cubin.gz route_i8.manifest)
cd $R
for round in 1 2; do
  for be in cuda:router=f64 cuda; do
    bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512,4K,16K \
      --context-lengths 256 --decode-tokens 4 --repeats 2 --floors=false
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
