#!/bin/bash
# run-split.sh: every CUDA test with the oracle (TestOracleOnGPU under the
# defaults and six other settings), then TestMeasureDenseSplit and
# TestMeasureRouter, then ncu's view of the first gate/up launch of m32
# and of s16 at 512 tokens (TestMeasureGEMM). From the repository root;
# devrun/ml holds cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go
# test -c -ldflags='-s -w' ./engine/cuda; gzip, or xz -9e as cuda.test.xz) and ref.txz (tar cJf
# ref.txz -C ../shared/oracle reference). Logs to $OUT. TESTS (a -test.run
# pattern; default all) and MEASURE (default the two above) choose.
# The call that ran the wgmma tiles first (2026-12-06-wg1), and the next
# one (w128r, the register-A form, written and not yet run), alike:
#   TESTS='TestGEMMDense|TestMoEGrouped|TestGEMMTilesFit|TestGEMMWGModule' MEASURE='TestMeasureGEMM' \
#   NCU='dense_w128o2:23 dense_w128r:23 dense_w256r:23' bash docs/bench/cuda/run-split.sh
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"; D=$R/devrun/ml
cd "$D" && { if [ -f cuda.test.xz ]; then xz -dc cuda.test.xz > cuda.test; else gunzip -f cuda.test.gz; fi; } && chmod +x cuda.test && mkdir -p oracle && tar xf ref.txz -C oracle \
	&& ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > "$O/env.txt" 2>&1
cd "$R/engine/cuda"
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
timeout ${TTIME:-330} "$D/cuda.test" -test.v ${TESTS:+-test.run "$TESTS"} > "$O/tests.txt" 2>&1; echo "tests: rc=$?" | tee -a "$O/tests.txt"
grep -E '^(--- FAIL|FAIL|ok|PASS)|panic' "$O/tests.txt" | head -20
echo "passed: $(grep -c '^--- PASS' "$O/tests.txt"), skipped: $(grep -c '^--- SKIP' "$O/tests.txt")"
grep -E 'top-1|KL' "$O/tests.txt" | head -20
PETAL_CUDA_BENCH=1 timeout ${MTIME:-120} "$D/cuda.test" -test.v -test.run "${MEASURE:-TestMeasureDenseSplit|TestMeasureRouter}" > "$O/measure.txt" 2>&1
grep -E 'dense |router |moe T=' "$O/measure.txt" | cut -c1-200
# NCU: kernels to profile as name[:skip] (gemm_<name>, its launch skip+1 in
# TestMeasureGEMM: 23 launches a timing, so dense_m128:23 is q_proj at 4096
# rows and gateup_m128:138 the MoE at 4096 tokens); NCU=1 is the two below.
[ "$NCU" = 1 ] && NCU="gateup_m32 gateup_s16"
for ks in $NCU; do
  k=${ks%%:*}; skip=0; [ "$k" != "$ks" ] && skip=${ks#*:}
  PETAL_CUDA_BENCH=1 timeout 150 ncu --kill yes --kernel-name gemm_$k --launch-skip $skip --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section Occupancy --section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis \
    "$D/cuda.test" -test.run TestMeasureGEMM > "$O/ncu-$k.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Issue Slots|Eligible Warps|Stall|Achieved Occ|Registers Per|Pipe|Shared" "$O/ncu-$k.txt" | head -30
done
