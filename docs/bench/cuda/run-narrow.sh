#!/bin/bash
# run-narrow.sh: w256rn, w128rn, w64rn and w32rn (gemm_tile's WG = 5: a tile's
# products only as wide as its rows; written, not yet run on a GPU) through
# the GEMM tests and TestMeasureGEMM (the MoE at 512 .. 16384 tokens beside
# w128rp and w64r), then prefill under gemm=wgrn against the defaults
# (gemm=wgrp) in two alternating rounds at 1152 / 2K / 4K / 16K tokens. The
# oracle (TestOracleOnGPU runs moe=stream,gemm=wgrn) is run-split.sh's;
# decattn=one went to run-decode2.sh.
# moe_route8 (GEMM.RouteAhead: eight ids a thread loaded before its
# atomics; written, not yet run) through TestMoERouteGroups, and timed
# beside moe_route in TestMeasureGEMM (moe_route: 9 / 46 / 170 us at 512 /
# 4096 / 16384 tokens, pipe2 and router5). About 4
# minutes. And splitk=wide (the wgmma tiles' dense GEMMs split over k
# where their blocks fill under half of the GPU, out_proj at 512 rows;
# written, not yet run): the split tests, TestMeasureDenseSplit at 512
# rows, and prefill beside the others. About 6 minutes in all.
# From the repository root; devrun/nx holds cuda.test.gz and petal.xz as
# run-pipe.sh says.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/nx; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run 'TestGEMMDense|TestGEMMGroupSplit|TestMoEGrouped|TestMoERouteGroups|TestGEMMTilesFit|TestGEMMWGModule' > $O/tests.txt 2>&1
echo "gemm tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | head; grep -E -- '--- FAIL' $O/tests.txt | head -12
PETAL_CUDA_BENCH=1 timeout 200 $D/cuda.test -test.v -test.run 'TestMeasureGEMM|TestMeasureDenseSplit' > $O/measure.txt 2>&1
echo "measure: rc=$?"
grep -E 'registers' $O/measure.txt | grep -E 'rn:' | sed 's/.*gemm_test.go:[0-9]*: //'
grep -E 'moe T=[0-9]+ route:' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //'
grep -E 'moe T=(512|1024|2048|4096|16384) +skew 0.0 (w32r|w32rn|w64r|w64rp|w64rn|w128rp|w128rn|w256rp|w256rn) ' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //' | cut -c1-200
grep -E 'dense .*M=512 w' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //'
grep -E 'dense .*M=4096' $O/measure.txt | sed 's/.*M=4096//' | tr '|' '\n' | grep -E 'w256rp|w256rn|w128rp|w128rn' | paste -s -d' ' | cut -c1-300
cd $R
for round in 1 2; do
  for be in cuda cuda:gemm=wgrn cuda:splitk=wide; do
    bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512,1K,1152,2K,4K,16K \
      --context-lengths 256 --decode-tokens 4 --repeats 2
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
