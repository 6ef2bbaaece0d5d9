#!/bin/bash
# run-l2next.sh: l2next (moe_down_ahead: a decoded token's MoE down kernel
# asks L2 for the next layer's first projections, 14 MB for a Gated
# DeltaNet layer, after its rows or before it stages h; written, not yet
# run). The cubins first (kernels/sass.sh into $OUT/sass, brought back as
# sass.tgz: moe.ptx changed), and everything below loads them
# (PETAL_CUDA_SASS). Then TestMoEMatchesReference (moe_down_ahead's output
# bit for bit moe_down's, both placements), the L2Ahead layout, conformance,
# and decode at 256 / 4K / 16K under the defaults, l2next=end and
# l2next=start in two alternating rounds. About 4 minutes. From the
# repository root; devrun/l2 holds cuda.test.gz and petal.xz as run-pipe.sh
# says.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/l2; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
export PATH=$PATH:/usr/local/cuda/bin
sh engine/cuda/kernels/sass.sh "$O/sass" > "$O/sass.txt" 2>&1; echo "sass.sh: rc=$?"
(cd "$O" && tar czf sass.tgz sass)
export PETAL_CUDA_SASS=$O/sass
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run 'TestMoEMatchesReference|TestL2AheadArgsMatchKernel|TestConformance|TestCubinsLoad' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | head -20; grep -E -- '--- FAIL|differs' $O/tests.txt | head -12
grep -E 'families from cubins' $O/tests.txt | sed 's/.*modules_test.go:[0-9]*: //'
cd $R
for round in 1 2; do
  for be in cuda cuda:l2next=end cuda:l2next=start; do
    bench_run "$D/petal" "$O" "dec-$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512 \
      --context-lengths 256,4K,16K --decode-tokens 64 --repeats 2
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
