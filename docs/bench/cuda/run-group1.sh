#!/bin/bash
# run-group1.sh: moegroup=blocks (moe_group.cu: the MoE's (token, slot)
# pairs grouped by expert over many blocks in three kernels, where
# moe_route8 takes one) on its first run. ptxas makes its cubin into a copy
# of the built-in ones (/tmp/s1, kept in sass.tgz); on those cubins
# TestMoERouteGroups (every form, 1 to 16K tokens, bad ids),
# TestTensorCoreOpsMatchReferences (moegroup=blocks among its modes) and
# TestCubinsLoad; the oracle under moegroup=blocks; TestMeasureGEMM's
# grouping times (moe_route, moe_route8, moe_group, at 512 to 16K tokens);
# prefill of 512 / 4K / 16K tokens, three runs a length, under the defaults
# and moegroup=blocks in two alternating rounds. From the repository root;
# $CARRY (default devrun/gr) holds petals.txz (petal, -tags nofixture),
# cuda.test.xz and ref.txz; the tree may go without its logs and PTX but
# moe_group.ptx. About 2 minutes; TESTS and SKIP_MEASURE=1 shorten it.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/gr}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
new_cubin /tmp/s1 moe_group $O
(cd /tmp && tar czf $O/sass.tgz s1/moe_group.sm_90.cubin.gz s1/manifest.txt)
cuda_tests /tmp/s1 $D/cuda.test "${TESTS:-TestMoERouteGroups|TestTensorCoreOpsMatchReferences|TestCubinsLoad}" $O/tests.txt
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 100 $D/cuda.test -test.v \
  -test.run 'TestOracleOnGPU/moegroup=blocks$' > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -3; grep -E 'top-1' $O/oracle.txt | cut -c1-200 | head -5
if [ -z "${SKIP_MEASURE:-}" ]; then
  (cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 timeout 60 $D/cuda.test -test.v -test.run 'TestMeasureGEMM$' > $O/measure.txt 2>&1)
  echo "measure: rc=$?"; grep -E 'route: moe_route' $O/measure.txt | cut -c1-200
fi
echo "tests: $(( $(date +%s) - start )) s"
for round in 1 2; do
  for be in cuda cuda:moegroup=blocks; do
    PETAL_CUDA_SASS=/tmp/s1 BENCH_LIMIT=60 bench_run $D/petal $O "$round-$(tag_of $be)" $be --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
