#!/bin/bash
# run-moewide.sh: moewide=on (gemm_wg.cu's w128rp4: w128rp with four
# warpgroups, 256 weight rows a block, one block a multiprocessor, so that
# the MoE's gate/up and down grids stage each tile's X rows half as often;
# written, not yet run). The GEMM tests (w128rp4 dense against float64 as
# every dense tile is, the MoE at 2048 and 4096 tokens), conformance,
# TestMeasureGEMM (its MoE at 2048 / 4096 / 16384 tokens and the dense
# shapes), then prefill at 2K / 4K / 8K / 16K under the defaults and
# moewide=on in two alternating rounds, then the cubins (gemm_wg.ptx
# changed: sass.tgz). About 5 minutes. From the repository root; devrun/s4
# holds cuda.test.xz and petal.xz (go build -tags nofixture).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/s4; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 240 $D/cuda.test -test.v -test.run 'TestGEMMWGModule|TestGEMMTilesFit|TestGEMMDenseMatchesReference|TestMoEGroupedMatchesReference|TestConformance' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | grep -v 'PASS: TestConformance/' | head -12
grep -E -- '--- FAIL|bound|differ' $O/tests.txt | head -12; grep -E 'w128rp4' $O/tests.txt | sed 's/.*gemm_test.go:[0-9]*: //' | cut -c1-200 | head -8
PETAL_CUDA_BENCH=1 timeout 240 $D/cuda.test -test.v -test.run 'TestMeasureGEMM' > $O/measure.txt 2>&1
echo "measure: rc=$?"
grep -E 'w128rp4: [0-9]+ registers' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //'
grep -E 'moe T=(2048|4096|16384) .* (w128rp|w128rp4) ' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //' | cut -c1-200
grep -E 'dense .*M=4096' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //' | grep -oE '^dense [^|]*M=4096|w256rp [^|]*|w128rp [^|]*|w128rp4 [^|]*' | paste -sd' ' | sed 's/dense /\ndense /g'
cd $R
for round in 1 2; do
  for be in cuda cuda:moewide=on; do
    bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 2K,4K,8K,16K \
      --context-lengths 256 --decode-tokens 4 --repeats 2 --floors=false
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
export PATH=$PATH:/usr/local/cuda/bin
sh engine/cuda/kernels/sass.sh "$O/sass" > "$O/sass.txt" 2>&1; echo "sass.sh: rc=$?"
(cd "$O" && tar czf sass.tgz sass && rm -rf sass)
