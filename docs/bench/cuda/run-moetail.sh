#!/bin/bash
# run-moetail.sh: moetail=32|64 (gemm_wg.cu's GEMM_MIXED tiles w128rps and
# w128rpm: w128rp's 128-row tiles, and each expert's last 32 or 64 rows or
# fewer in a tile of that many rows, listed after them by moe_route's new
# BS; written, not yet run). The routing and MoE tests with the mixed tiles
# (the tile map checked entry by entry, poisoned; the grouped GEMMs against
# float64 at 2048 and 4096 tokens, where both kinds of tile run), the
# conformance suite, TestMeasureGEMM's MoE at 2048 / 4096 / 16384 tokens,
# then prefill at 2K / 4K / 8K / 16K under moetail=off, 32 and 64 in two
# alternating rounds, then the cubins (gemm.ptx and gemm_wg.ptx changed:
# sass.tgz). About 6 minutes. From the repository root; devrun/s3 holds
# cuda.test.xz and petal.xz (go build -tags nofixture).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/s3; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run 'TestGEMMWGModule|TestGEMMTilesFit|TestMoERouteGroups|TestMoEGroupedMatchesReference|TestMoERouteCountsBadIDs|TestConformance' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | grep -v 'PASS: TestConformance/' | head -12
grep -E -- '--- FAIL|want|bound' $O/tests.txt | head -12; grep -E 'T=(2048|4096) .*w128rp' $O/tests.txt | sed 's/.*gemm_test.go:[0-9]*: //' | cut -c1-160
PETAL_CUDA_BENCH=1 timeout 200 $D/cuda.test -test.v -test.run 'TestMeasureGEMM' > $O/measure.txt 2>&1
echo "measure: rc=$?"
grep -E 'moe T=(2048|4096|16384) .* (w128rp|w128rps|w128rpm) ' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //' | cut -c1-200
cd $R
for round in 1 2; do
  for be in cuda cuda:moetail=32 cuda:moetail=64; do
    bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 2K,4K,8K,16K \
      --context-lengths 256 --decode-tokens 4 --repeats 2 --floors=false
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
export PATH=$PATH:/usr/local/cuda/bin
sh engine/cuda/kernels/sass.sh "$O/sass" > "$O/sass.txt" 2>&1; echo "sass.sh: rc=$?"
(cd "$O" && tar czf sass.tgz sass && rm -rf sass)
