#!/bin/bash
# run-pdllate1.sh: pdl=late (each kernel launched early, as under pdl=on,
# but let launch only once the kernel before has issued its main work, at
# pdl_trigger, or as its blocks retire; the single-matrix mat-vecs ask L2
# for their first rows before the wait; written, not yet run). The tests it
# touches (every module's petal_pdl_late set, conformance under it and the
# other settings, the kernels with a pdl_trigger), then decode at 4K and 32K
# under pdl=some (the default), late and on, with main's build beside it
# under its default, in two alternating rounds, and a kernel trace of decode
# at 4K under the default and pdl=late (ktrace-kt-*.csv.gz). The new PTX's cubins are
# made here first with the toolkit's ptxas (device.h changed every
# family's PTX, so the embedded ones are stale) and both builds run ptxas'
# code. From the repository root; devrun/pl holds cuda.test.xz and petal.xz
# of the change and petal-main.xz (main before it), all -tags nofixture.
# Logs in $OUT.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/pl; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
(cd "$D" && xz -dc petal-main.xz > petal-main && chmod +x petal-main)
gpu_env "$O/env.txt"
s=$(date +%s)
PATH=$PATH:/usr/local/cuda/bin sh engine/cuda/kernels/sass.sh /tmp/sass > $O/sass.txt 2>&1
echo "sass.sh: rc=$? in $(( $(date +%s) - s )) s"
cd $R/engine/cuda
PETAL_CUDA_SASS=/tmp/sass PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run \
  'TestPDLLateSetsEveryModule|TestConformance|TestParseOptionsChoices|TestCubinsLoad|TestGDNMatchesReference|TestRouteMatchesReference|TestQMVMatchesReference|TestNormGroupMatchesApart|TestNormRouteMatchesApart|TestFusedMatchReferences|TestMoELayerArgsMatchKernel' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- FAIL|FAIL|ok|PASS)|panic' $O/tests.txt | head
echo "top-level: $(grep -c '^--- PASS' $O/tests.txt) passed, $(grep -c '^--- FAIL' $O/tests.txt) failed"
cd $R
for round in 1 2; do
  BENCH_LIMIT=70 bench_run "$D/petal-main" "$O" "$round-main-some" cuda --max-context 40000 --prompt-lengths 512 \
    --context-lengths 4K,32K --decode-tokens 64 --floors=false
  for be in cuda:pdl=late cuda cuda:pdl=on; do
    PETAL_CUDA_SASS=/tmp/sass BENCH_LIMIT=70 bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 40000 \
      --prompt-lengths 512 --context-lengths 4K,32K --decode-tokens 64 --floors=false
  done
done
# every kernel of a decoded token timed (run-ktrace.sh), the default and pdl=late
for t in default late; do
  be=cuda; [ $t = late ] && be=cuda:pdl=late
  PETAL_CUDA_SASS=/tmp/sass PETAL=$D/petal TAG=kt-$t BACKEND=$be KT_PROMPTS=512 LIMIT=90 \
    bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1
  echo "ktrace $t: rc=$?"
done
(cd /tmp && tar czf $O/sass.tgz sass)
pack_out "$O"
