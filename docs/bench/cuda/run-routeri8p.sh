#!/bin/bash
# run-routeri8p.sh: router=i8p (route_i8p.cu: x's byte parts made once by
# qi_parts, then qgemm_i8p with the parts staged beside the codes, one
# barrier a group; written, not yet run): the router tests and conformance
# (router=i8p among its settings), TestMeasureRouter (qgemm_i8 and
# qgemm_i8p lines), route_i8p's cubin (route_i8p.tgz, as sass.sh makes it)
# and ptxas -v, prefill at 512 / 4K / 16K under router=i8 and i8p in two
# rounds. From the repository root; devrun/rp holds cuda.test.xz and
# petal.xz (-tags nofixture).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/rp; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 120 $D/cuda.test -test.v -test.run 'TestRouterTensorCores|TestConformance' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | grep -v 'PASS: Test[A-Za-z]*/' | head -8
grep -E -- '--- FAIL|differ' $O/tests.txt | head -8; grep -E 'under qi_parts' $O/tests.txt | sed 's/.*: weights/weights/' | head -24
PETAL_CUDA_BENCH=1 timeout 90 $D/cuda.test -test.v -test.run 'TestMeasureRouter' > $O/router.txt 2>&1
echo "router: rc=$?"; grep -E 'qgemm_i8' $O/router.txt | grep -E ' (1|2|4) blocks an SM' | sed 's/.*backend_test.go:[0-9]*: //' | head -40
cd $R/engine/cuda/kernels
PATH=$PATH:/usr/local/cuda/bin; v=$(ptxas --version | grep -o 'V[0-9][0-9.]*' | head -1)
ptxas -arch=sm_90 -O3 -v route_i8p.ptx -o /tmp/route_i8p.sm_90.cubin > $O/ptxas.txt 2>&1; grep -E 'entry|Used|spill' $O/ptxas.txt
gzip -9 -n -f /tmp/route_i8p.sm_90.cubin && echo "route_i8p sm_90 $(sha256sum route_i8p.ptx | cut -d' ' -f1) $v" > /tmp/route_i8p.manifest
(cd /tmp && tar czf $O/route_i8p.tgz route_i8p.sm_90.cubin.gz route_i8p.manifest)
cd $R
for round in 1 2; do
  for be in cuda cuda:router=i8p; do
    bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512,4K,16K \
      --context-lengths 256 --decode-tokens 4 --repeats 2 --floors=false
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
