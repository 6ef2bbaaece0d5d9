#!/bin/bash
# run-pdltrig1.sh: no kernel lets the next launch at its start any more
# (pdl_begin only waits); the next kernel launches at pdl_trigger (before a
# last block's tail behind a ticket) or as the blocks retire, which is
# pdl=late of pdllate1 without the constant each kernel read to choose.
# The tests pdl touches and TestMeasurePhases, then decode at 4K and 32K
# (prompt 512) under pdl=some and on, with main's build beside it under
# its default, in two alternating rounds. The new PTX's cubins are made here first, as in
# pdllate1. From the repository root; devrun/pl holds cuda.test.xz and
# petal.xz of the change and petal-main.xz (main before pdl=late), all
# -tags nofixture. Logs in $OUT.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/pl; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
[ -x "$D/petal-main" ] || (cd "$D" && xz -dc petal-main.xz > petal-main && chmod +x petal-main)
gpu_env "$O/env.txt"
s=$(date +%s)
PATH=$PATH:/usr/local/cuda/bin sh engine/cuda/kernels/sass.sh /tmp/sass > $O/sass.txt 2>&1
echo "sass.sh: rc=$? in $(( $(date +%s) - s )) s"
cd $R/engine/cuda
PETAL_CUDA_SASS=/tmp/sass PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 timeout 200 $D/cuda.test -test.v -test.run \
  'TestConformance|TestCubinsLoad|TestGDNMatchesReference|TestRouteMatchesReference|TestNormRouteMatchesApart|TestMeasurePhases' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- FAIL|FAIL|ok|PASS)|panic|µs a phase' $O/tests.txt | head -12
echo "top-level: $(grep -c '^--- PASS' $O/tests.txt) passed, $(grep -c '^--- FAIL' $O/tests.txt) failed"
cd $R
for round in 1 2; do
  BENCH_LIMIT=70 bench_run "$D/petal-main" "$O" "$round-main-some" cuda --max-context 40000 --prompt-lengths 512 \
    --context-lengths 4K,32K --decode-tokens 64 --floors=false
  for be in cuda:pdl=on cuda; do
    PETAL_CUDA_SASS=/tmp/sass BENCH_LIMIT=70 bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 40000 \
      --prompt-lengths 512 --context-lengths 4K,32K --decode-tokens 64 --floors=false
  done
done
(cd /tmp && tar czf $O/sass.tgz sass)
pack_out "$O"
