#!/bin/bash
# run-profile.sh: ncu's view of one prefill GEMM launch and a short bench of
# the defaults against the settings before 2026-12-06-pipe1, in about two
# minutes of a GPU. From the repository root; devrun/ml holding
# cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c
# -ldflags='-s -w' ./engine/cuda; gzip) and petals.txz (petal, built the
# same way with go build, in an xz tar). KERNEL (default gemm_dense_m128)
# and SKIP (default 23: TestMeasureGEMM's q_proj at 4096 rows, after the
# 23 launches of its 512-row timing) choose the launch; SPECS the benches.
R=$(pwd); D=$R/devrun/ml; O=${OUT:-/tmp/out}; mkdir -p $O
cd $D && gunzip -f cuda.test.gz && chmod +x cuda.test && tar xJf petals.txz
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
cd $R/engine/cuda
PETAL_CUDA_BENCH=1 timeout 60 ncu --kill yes --kernel-name ${KERNEL:-gemm_dense_m128} --launch-skip ${SKIP:-23} --launch-count 1 \
	--section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis \
	--section SchedulerStats --section ComputeWorkloadAnalysis --section LaunchStats \
	$D/cuda.test -test.run TestMeasureGEMM > $O/ncu.txt 2>&1
grep -E "Duration|Throughput|Issue Slots|Eligible|Stall|Occupancy|Registers|Pipe|Shared|Bank|Grid Size|Block Size" $O/ncu.txt | head -45
cd $R
for spec in ${SPECS:-cuda cuda:moe=smem,splitk=on}; do
	f=$(echo "$spec" | tr ':=,' '_._')
	timeout 45 $D/petal bench --backend $spec --synthetic qwen3.6-35b-a3b --max-context 8192 --prompt-lengths 16,512,1K,4K \
		--context-lengths 256 --decode-tokens 8 --repeats 3 --out $O/bench-$f.json > $O/bench-$f.txt 2>&1
	echo "$spec"; grep -E "^ +[0-9]+K? |rror" $O/bench-$f.txt
done
