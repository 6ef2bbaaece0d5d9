#!/bin/bash
# run-moeys1.sh: moeys=bf16 (gemm_downbf.cu: the MoE's down GEMM writing its
# expert outputs in bf16, moe_combine_bf adding them back in float32) on
# its first run. ptxas makes its cubin into a copy of the built-in ones
# (/tmp/s1, kept in sass.tgz); then on those cubins TestCubinsLoad,
# TestMoEGroupedMatchesReference (the bf16 outputs the float32 ones
# rounded, bit for bit, every tile that has them), TestTensorCoreBars and
# TestTensorCoreOpsMatchReferences (moeys=bf16 among their modes), the
# oracle under moeys=bf16, prefill of 512 / 4K / 16K tokens (three runs a
# length, the median) under the defaults and moeys=bf16 in two
# alternating rounds, and last TestMeasureGEMM (every tile's MoE with
# both outputs; cut at MEASURE_LIMIT seconds, default 120). From the
# repository root; $CARRY (default devrun/my) holds petals.txz (petal,
# -tags nofixture), cuda.test.xz and ref.txz (devrun-pack.sh with
# TEST=HEAD, then tar cJf ref.txz -C ../shared/oracle reference); the tree
# may go without its logs and PTX but gemm_downbf.ptx. About 6 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/my}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
new_cubin /tmp/s1 gemm_downbf $O
(cd /tmp && tar czf $O/sass.tgz s1/gemm_downbf.sm_90a.cubin.gz s1/manifest.txt)
cuda_tests /tmp/s1 $D/cuda.test 'TestCubinsLoad|TestMoEGroupedMatchesReference|TestTensorCoreBars|TestTensorCoreOpsMatchReferences' $O/tests.txt
grep -E 'bf16 ys|against bf16 inputs and outputs' $O/tests.txt | head -12
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 100 $D/cuda.test -test.v \
  -test.run 'TestOracleOnGPU/moeys=bf16$' > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -6; grep -E 'top-1' $O/oracle.txt | cut -c1-200 | head -5
echo "tests: $(( $(date +%s) - start )) s"
for round in 1 2; do
  for be in cuda cuda:moeys=bf16; do
    PETAL_CUDA_SASS=/tmp/s1 BENCH_LIMIT=80 bench_run $D/petal $O "$round-$(tag_of $be)" $be --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 4K --decode-tokens 16 --repeats 3 --floors=false
  done
done
echo "benches: $(( $(date +%s) - start )) s"
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 timeout ${MEASURE_LIMIT:-120} $D/cuda.test -test.v -test.run 'TestMeasureGEMM$' > $O/measure.txt 2>&1)
echo "measure: rc=$?"; grep 'bf16 outputs' $O/measure.txt | grep -E 'T=(512 |4096|16384)' | cut -c1-360 | head -14
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
