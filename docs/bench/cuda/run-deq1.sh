#!/bin/bash
# run-deq1.sh: the register-A GEMM tiles' dequantisation in three integer
# operations a pair and their code words read a k-step ahead (4bfb59c) on
# their first run. ptxas makes the cubins of gemm_wg, gemm_fit and
# gemm_downbf again into a copy of the built-in ones (/tmp/s1, kept in
# sass.tgz); on them the GEMM, MoE and tensor-core tests, conformance and
# the oracle; Nsight Compute's stall reasons of gate/up on w160rp at 4096
# tokens (as run-ncu2.sh); prefill of 512 / 4K / 16K tokens, three runs a
# length, petal-old (17f8052, its built-in cubins) against petal (4bfb59c,
# /tmp/s1) in two alternating rounds. From the repository root; $CARRY
# (default devrun/dq) holds petals.txz (petal, petal-old; -tags
# nofixture), cuda.test.xz and ref.txz; the tree may go without its logs
# and PTX but gemm_wg.ptx, gemm_fit.ptx and gemm_downbf.ptx. About 3
# minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/dq}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
for fam in gemm_wg gemm_fit gemm_downbf; do
  sed -i "/^$fam /d" /tmp/s1/manifest.txt && rm -f /tmp/s1/$fam.*.cubin.gz
  new_cubin /tmp/s1 $fam $O
done
(cd /tmp && tar czf $O/sass.tgz s1/gemm_wg.sm_90a.cubin.gz s1/gemm_fit.sm_90a.cubin.gz s1/gemm_downbf.sm_90a.cubin.gz s1/manifest.txt)
cuda_tests /tmp/s1 $D/cuda.test "${TESTS:-TestGEMM|TestMoE|TestTensorCore|TestNormBF16|TestConformance}" $O/tests.txt
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 100 $D/cuda.test -test.v \
  -test.run 'TestOracleOnGPU/default$' > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -3; grep -E 'top-1' $O/oracle.txt | cut -c1-200 | head -5
echo "tests: $(( $(date +%s) - start )) s"
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 timeout 100 ncu --kill yes --kernel-name gemm_gateup_w160rp \
  --launch-skip 140 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  --section ComputeWorkloadAnalysis --metrics 'regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$' \
  $D/cuda.test -test.run '^TestMeasureGEMM$' > $O/ncu-gateup.txt 2>&1)
echo "ncu: rc=$?"; grep -E "stalled" $O/ncu-gateup.txt | awk '$NF+0 > 0.05' | sort -k3 -g -r | head -8
grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued" $O/ncu-gateup.txt
for round in 1 2; do
  BENCH_LIMIT=60 bench_run $D/petal-old $O "$round-old" cuda --max-context 17000 \
    --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  PETAL_CUDA_SASS=/tmp/s1 BENCH_LIMIT=60 bench_run $D/petal $O "$round-new" cuda --max-context 17000 \
    --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
