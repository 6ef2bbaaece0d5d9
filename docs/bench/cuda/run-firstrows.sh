#!/bin/bash
# run-firstrows.sh: firstrows=4|6 (qmv.cu's qmv_group_norm_i8x3_r4 and _r6:
# a layer's first projections in decode with four or six rows a lane, so
# that a Gated DeltaNet layer's 12,352 rows take two steps of loads over
# 264 blocks, or one, where r2 takes three; written, not yet run).
# TestNormGroupMatchesApart (each form bit for bit the two-launch path, its
# registers and local memory logged), the grouped entries' parameters,
# conformance (firstrows=6 among its settings), then decode at 256 / 4K /
# 16K under firstrows=2, 4 and 6 in two alternating rounds, then the cubins
# (qmv.ptx changed: sass.tgz). With them gdn_step's conv-state ticket
# looked at with the gated norm's rather than waited for before the delta
# rule (the same outputs): TestGDNMatchesReference, and decode against
# petal-old (the build before it) in the same rounds. About 5 minutes.
# From the repository root; devrun/s5 holds cuda.test.xz, petal.xz and
# petal-old.xz (go build -tags nofixture).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/s5; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
(cd "$D" && xz -dc petal-old.xz > petal-old && chmod +x petal-old)
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run 'TestNormGroupMatchesApart|TestQMVGroupArgsMatchKernel|TestGDNMatchesReference|TestConformance' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | grep -v 'PASS: TestConformance/' | head -12
grep -E -- '--- FAIL|differ|fused, .* apart' $O/tests.txt | head -12; grep -E 'registers' $O/tests.txt | sed 's/.*backend_test.go:[0-9]*: //'
cd $R
for round in 1 2; do
  for run in petal-old:cuda petal:cuda petal:cuda:firstrows=4 petal:cuda:firstrows=6; do
    be=${run#*:}
    bench_run "$D/${run%%:*}" "$O" "$round-${run%%:*}-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512 --context-lengths 256,4K,16K \
      --decode-tokens 64 --floors=false
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
export PATH=$PATH:/usr/local/cuda/bin
sh engine/cuda/kernels/sass.sh "$O/sass" > "$O/sass.txt" 2>&1; echo "sass.sh: rc=$?"
(cd "$O" && tar czf sass.tgz sass && rm -rf sass)
