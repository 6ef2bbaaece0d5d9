#!/bin/bash
# run-qmvtc.sh: the tensor-core mat-vec qmv_mma (qmv.cu) on its first GPU:
# ptxas's resource report of qmv.ptx and the SASS of qmv_mma_r2, the qmv
# correctness tests (TestQMVMatchesReference and the rest, with
# TestQMVMMAMatchesReference), then TestMeasureQMVMMA (qmv_mma against
# i8x3_r2_sb, graphs of copies, L2-cold). Run from the repository root as
# `bash devrun/qmvtc/run.sh`, next to cuda.test.gz (CGO_ENABLED=0 go test -c
# ./engine/cuda) and qmv.ptx (engine/cuda/kernels/qmv.ptx of the same
# build); logs to $OUT.
R=$(pwd); D=$R/devrun/qmvtc; O=${OUT:-/tmp/out}; mkdir -p "$O"
cd "$D" && gunzip -f cuda.test.gz && chmod +x cuda.test || exit 1
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } > "$O/env.txt" 2>&1
PTXAS=/usr/local/cuda/bin/ptxas
$PTXAS -arch=sm_90 -v -o "$D/qmv.cubin" "$D/qmv.ptx" > "$O/ptxas.txt" 2>&1
echo "ptxas: rc=$?" | tee -a "$O/ptxas.txt"
grep -A4 -E "Compiling entry function '(qmv_mma_r[124]|qmv_i8x3_r2_sb)'" "$O/ptxas.txt" | grep -E "Compiling|registers|spill" | head -20
/usr/local/cuda/bin/cuobjdump --dump-sass -fun qmv_mma_r2 "$D/qmv.cubin" > "$O/sass-qmv_mma_r2.txt" 2>&1
cd "$R/engine/cuda"
PETAL_CUDA_REQUIRE=1 timeout 80 "$D/cuda.test" -test.v -test.run 'TestQMV|TestMMA' > "$O/tests.txt" 2>&1
echo "tests: rc=$?" | tee -a "$O/tests.txt"
grep -E '^(--- |    --- FAIL|panic|FAIL)|resources|rror' "$O/tests.txt" | head -40
PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 timeout 85 "$D/cuda.test" -test.v -test.run '^TestMeasureQMVMMA$' > "$O/measure.txt" 2>&1
echo "measure: rc=$?" | tee -a "$O/measure.txt"
grep -E '\||ceiling|resources|^--- ' "$O/measure.txt" | sed 's/^ *measure_qmv_mma_test.go:[0-9]*: //'
