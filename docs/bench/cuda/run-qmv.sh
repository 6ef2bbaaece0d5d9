#!/bin/bash
# run-qmv.sh: one GPU session for the qmv and moe kernel families: ptxas
# resource reports and instruction counts of the embedded PTX, the
# correctness tests, then the measurements. Run as devrun/run.sh next to
# cuda.test (CGO_ENABLED=0 go test -c ./engine/cuda) and engine/cuda/kernels.
set -o pipefail
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
{
for f in qmv moe; do
	echo "== ptxas -arch=sm_90 -O3 -v kernels/$f.ptx"
	ptxas -arch=sm_90 -O3 -v -o $f.cubin kernels/$f.ptx
done
} > $O/ptxas.txt 2>&1
# SASS instruction counts per kernel (static, whole kernel).
for f in qmv moe; do cuobjdump --dump-sass $f.cubin; done > sass.txt 2>&1
cp sass.txt $O/sass.txt
awk '/Function :/ { if (name) print name, n; name=$3; delete c; n="" }
     /\/\*[0-9a-f]+\*\// { op=$2; sub(/\..*/, "", op); sub(/;/, "", op); if (op ~ /^@/) op=$3; c[op]++;
       n=""; for (k in c) if (k ~ /^(IDP4A|LOP3|FFMA|FADD|FMUL|HFMA2|HADD2|LDG|LDS|SHF|IMAD|I2F|F2F|HMUL2)$/) n=n" "k"="c[k] }
     END { print name, n }' sass.txt > $O/sass-counts.txt
export PETAL_CUDA_REQUIRE=1
./cuda.test -test.v -test.run 'TestQMV|TestMoE' 2>&1 | tee $O/test.txt | grep -E '^(--- |ok|FAIL|PASS)|lm_head.*(i8x2_r4_sb|f16_r4_sb|i8x1)|35B|rror'
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv -lms 250 > $O/clocks.txt 2>&1 &
SMI=$!
PETAL_CUDA_BENCH=1 ./cuda.test -test.v -test.run 'TestMeasureQMV|TestMeasureMoE' 2>&1 | tee $O/measure.txt | grep -vE '^=== RUN|resources'
kill $SMI
