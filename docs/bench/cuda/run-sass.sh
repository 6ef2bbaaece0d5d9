#!/bin/bash
# run-sass.sh: the embedded PTX compiled to cubins for compute capability
# 9.0 by the toolkit's ptxas (engine/cuda/kernels/sass.sh, into
# $OUT/sass, brought back as sass.tgz to be committed under
# engine/cuda/kernels/sass), then loaded from that folder
# (PETAL_CUDA_SASS) by the GPU tests: TestCubinsLoad (every kernel of each
# family in its cubin; load times of cubin and PTX with the driver's cache
# off), conformance and the tensor-core, attention and MoE kernels'
# references. Then a first petal run on the embedded model in a fresh
# process, cubins against PTX, with the driver's cache off and with it
# empty; and prefill and decode with each, which should not differ. About
# 5 minutes. From the repository root; devrun/sx holds cuda.test.gz and
# petal.xz as run-pipe.sh says.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/sx; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
export PATH=$PATH:/usr/local/cuda/bin
s=$(date +%s.%N)
sh engine/cuda/kernels/sass.sh "$O/sass" > "$O/sass.txt" 2>&1
echo "sass.sh: rc=$?, $(awk "BEGIN{print $(date +%s.%N) - $s}") s; $(ptxas --version | tail -1)"
ls -la "$O/sass" | awk '{print $5, $9}'
(cd "$O" && tar czf sass.tgz sass)
cd $R/engine/cuda
PETAL_CUDA_SASS=$O/sass CUDA_CACHE_DISABLE=1 PETAL_CUDA_REQUIRE=1 timeout 120 $D/cuda.test -test.v -test.run 'TestCubinsLoad' > $O/load.txt 2>&1
echo "load: rc=$?"; grep -E 'families from cubins|refused|lacks|FAIL' $O/load.txt | sed 's/.*modules_test.go:[0-9]*: //'
PETAL_CUDA_SASS=$O/sass PETAL_CUDA_REQUIRE=1 timeout 280 $D/cuda.test -test.v -test.run 'TestConformance|TestTensorCoreOpsMatchReferences|TestAttnMatchesReference|TestMoEGroupedMatchesReference|TestGEMMDenseMatchesReference|TestQMV' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | head -20; grep -E -- '--- FAIL' $O/tests.txt | head -12
cd $R
{
  for cache in off empty; do
    for sass in "$O/sass" off; do
      rm -rf ~/.nv/ComputeCache
      s=$(date +%s.%N)
      if [ $cache = off ]; then export CUDA_CACHE_DISABLE=1; else unset CUDA_CACHE_DISABLE; fi
      PETAL_CUDA_SASS=$sass timeout 120 $D/petal run --backend cuda --max-tokens 8 "Hi" > /dev/null 2> /tmp/stderr.txt
      echo "cache $cache, PETAL_CUDA_SASS=$(basename $sass): rc=$?, $(awk "BEGIN{print $(date +%s.%N) - $s}") s; stderr: $(head -c 300 /tmp/stderr.txt | tr '\n' ' ')"
    done
  done
  unset CUDA_CACHE_DISABLE
} > $O/first.txt 2>&1
cat $O/first.txt
for round in 1 2; do
  for sass in "$O/sass" off; do
    export PETAL_CUDA_SASS=$sass
    bench_run "$D/petal" "$O" "$round-sass_$(basename $sass)" cuda --max-context 5000 --prompt-lengths 512,4K \
      --context-lengths 4K --decode-tokens 32 --repeats 2
  done
done
unset PETAL_CUDA_SASS
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
