#!/bin/bash
# run.sh: one GPU session: nvcc builds of qmatvec.cu, the driver and mat-vec
# tests, and the measurements (clang PTX against nvcc PTX and cubins).
set -o pipefail
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv; nvcc --version; } > $O/env.txt 2>&1
{
echo "== nvcc -cubin -arch=sm_90 -O3 -Xptxas -v"
nvcc -cubin -arch=sm_90 -O3 -Xptxas -v -o qmatvec.nvcc.cubin kernels/qmatvec.cu
nvcc -ptx -arch=sm_90 -O3 -o qmatvec.nvcc.ptx kernels/qmatvec.cu
echo "== ptxas -arch=sm_90 -O3 -v on clang's PTX"
ptxas -arch=sm_90 -O3 -v -o qmatvec.clang.cubin kernels/qmatvec.ptx
} > $O/ptxas.txt 2>&1
cuobjdump --dump-sass qmatvec.clang.cubin > $O/sass-clang.txt 2>&1
cuobjdump --dump-sass qmatvec.nvcc.cubin > $O/sass-nvcc.txt 2>&1
tail -5 $O/ptxas.txt
export PETAL_CUDA_REQUIRE=1
./driver.test -test.v 2>&1 | tee $O/driver.txt | grep -E '^(--- |ok|FAIL|PASS)|cuda:'
./cuda.test -test.v -test.run 'TestMatVec' 2>&1 | tee $O/matvec.txt | grep -E '^(--- |ok|FAIL|PASS)|lm_head|Error'
ALT=""
[ -f qmatvec.nvcc.cubin ] && ALT="nvcc-cubin=qmatvec.nvcc.cubin"
[ -n "$FULL" ] && [ -f qmatvec.nvcc.ptx ] && ALT="$ALT,nvcc-ptx=qmatvec.nvcc.ptx"
[ -n "$FULL" ] && [ -f qmatvec.clang.cubin ] && ALT="$ALT,clang-ptxas=qmatvec.clang.cubin"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv -lms 200 > $O/clocks.txt 2>&1 &
SMI=$!
PETAL_CUDA_BENCH=1 PETAL_CUDA_QMATVEC_ALT=${ALT#,} ./cuda.test -test.v -test.run 'TestMeasure' 2>&1 | tee $O/measure.txt | grep -vE '^=== RUN'
kill $SMI
