#!/bin/bash
# run-decode2.sh: decattn=one (attn_split_last: the split attention's last
# chunk of each KV head merges its queries, one launch where decode ran two
# an attention layer) and prewait=on (qmv_group_norm_pw and moe_gate_up_pw:
# the kernels pdl=some launches early ask L2 for their weights, a layer's
# first projections and the shared expert's gate and up, before waiting for
# the kernel before them), both written, not yet run: TestAttnMatchesReference
# and TestConformance (its variants take both), then decode at 256 / 4K /
# 16K under the defaults, each and both, in two alternating rounds. About 5
# minutes. From the repository root; devrun/nx holds cuda.test.gz and
# petal.xz as run-pipe.sh says.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/nx; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run 'TestAttnMatchesReference|TestConformance' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | head -20; grep -E -- '--- FAIL' $O/tests.txt | head -12
cd $R
for round in 1 2; do
  for be in cuda cuda:decattn=one cuda:prewait=on cuda:decattn=one,prewait=on; do
    bench_run "$D/petal" "$O" "dec-$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512 \
      --context-lengths 256,4K,16K --decode-tokens 64 --repeats 2
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
